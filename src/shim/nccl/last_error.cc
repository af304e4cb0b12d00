// The last error, per thread as NCCL's callers read it: right after the
// call that failed, on the thread that made it.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "shim/nccl/entry.h"

namespace prism::nccl {
namespace {

// A fixed buffer: recording an error must not fail or allocate.
constexpr std::size_t kMaxMessage = 1024;
thread_local char t_last_error[kMaxMessage] = "";

}  // namespace

void set_last_error(std::string_view message) noexcept {
  const std::size_t n = std::min(message.size(), kMaxMessage - 1);
  std::memcpy(t_last_error, message.data(), n);
  t_last_error[n] = '\0';
}

const char* last_error() noexcept {
  return t_last_error;
}

ncclResult_t fail(ncclResult_t code, const char* fn, std::string_view why) noexcept {
  const int n = std::snprintf(t_last_error, kMaxMessage, "%s: %.*s", fn,
                              static_cast<int>(why.size()), why.data());
  if (n < 0) set_last_error(why);
  return code;
}

ncclResult_t unsupported(const char* fn) noexcept {
  std::snprintf(t_last_error, kMaxMessage, "%s is not supported by PrismLLM's NCCL drop-in", fn);
  return ncclInvalidUsage;
}

}  // namespace prism::nccl
