// PRISM_CHECK: for broken invariants (bugs), never for bad input. A failed
// check prints file:line and the message to stderr and aborts.
#pragma once

#include <string>
#include <string_view>

namespace prism::internal {
[[noreturn]] void check_failed(const char* file, int line, const char* cond, std::string_view msg);
}  // namespace prism::internal

#define PRISM_CHECK(cond, msg)                                           \
  do {                                                                   \
    if (!(cond)) [[unlikely]]                                            \
      ::prism::internal::check_failed(__FILE__, __LINE__, #cond, (msg)); \
  } while (0)
