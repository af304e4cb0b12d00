// What every NCCL entry point of the drop-in shares: the NCCL 2.28 header
// the signatures are checked against, the pncclX aliases, the last error,
// and the guard that keeps exceptions inside the library.
//
// nccl.h's declarations carry no `noexcept`, and a definition may not add
// one, so each entry point runs its body inside guarded(), which is
// noexcept and turns any exception into an NCCL error with a message.
#pragma once

#include <cstdint>
#include <exception>
#include <new>
#include <string>
#include <string_view>

// Only nccl* and pnccl* leave the library (exports.map); their declarations
// get default visibility here, everything else stays hidden.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#pragma GCC visibility push(default)
#include <nccl.h>
#pragma GCC visibility pop

#include <fmt/format.h>

// pnccl<name>: the profiling alias NCCL exports beside every entry point.
// decltype makes the alias's type that of the definition, and the header's
// own pnccl declaration checks it.
#define PRISM_NCCL_ALIAS(name) \
  extern "C" decltype(name) p##name __attribute__((alias(#name), visibility("default")));

// Returns from the enclosing function when a check fails.
#define PRISM_NCCL_TRY(expr)                                                     \
  do {                                                                           \
    if (const ncclResult_t prism_nccl_r_ = (expr); prism_nccl_r_ != ncclSuccess) \
      return prism_nccl_r_;                                                      \
  } while (0)

namespace prism::nccl {

// The message ncclGetLastError() returns on this thread.
void set_last_error(std::string_view message) noexcept;
const char* last_error() noexcept;

// Sets "fn: why" as the last error and returns `code`.
ncclResult_t fail(ncclResult_t code, const char* fn, std::string_view why) noexcept;

template <typename... Args>
ncclResult_t failf(ncclResult_t code, const char* fn, fmt::format_string<Args...> f,
                   Args&&... args) noexcept {
  try {
    return fail(code, fn, fmt::format(f, std::forward<Args>(args)...));
  } catch (...) {
    return fail(code, fn, "(out of memory formatting the message)");
  }
}

// Runs body() and returns its result; an exception becomes an error that
// names `fn`: ncclSystemError when memory ran out, else ncclInternalError.
template <typename Body>
ncclResult_t guarded(const char* fn, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(ncclSystemError, fn, "out of memory");
  } catch (const std::exception& e) {
    return fail(ncclInternalError, fn, e.what());
  } catch (...) {
    return fail(ncclInternalError, fn, "unknown exception");
  }
}

// Entry points the drop-in does not implement: ncclInvalidUsage, with a
// message that names the function.
ncclResult_t unsupported(const char* fn) noexcept;

}  // namespace prism::nccl
