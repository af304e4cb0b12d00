#include "util/check.h"

#include <cstdio>
#include <cstdlib>

namespace prism::internal {

void check_failed(const char* file, int line, const char* cond, std::string_view msg) {
  std::fprintf(stderr, "%s:%d: PRISM_CHECK(%s) failed: %.*s\n", file, line, cond,
               static_cast<int>(msg.size()), msg.data());
  std::abort();
}

}  // namespace prism::internal
