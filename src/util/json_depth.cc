#include "util/json_depth.h"

#include <array>
#include <string>

namespace prism {
namespace {

// What a byte means to the scan; most bytes mean nothing, and the loop
// tests them once (traces run to hundreds of megabytes).
enum Kind : unsigned char { kOther, kQuote, kBackslash, kOpen, kClose };

constexpr std::array<Kind, 256> kinds() {
  std::array<Kind, 256> k{};
  k['"'] = kQuote;
  k['\\'] = kBackslash;
  k['['] = kOpen;
  k['{'] = kOpen;
  k[']'] = kClose;
  k['}'] = kClose;
  return k;
}

constexpr std::array<Kind, 256> kKinds = kinds();

}  // namespace

Status check_json_depth(std::string_view text, std::string_view source, std::size_t max_depth) {
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const Kind k = kKinds[static_cast<unsigned char>(text[i])];
    if (k == kOther) continue;
    if (in_string) {
      if (k == kBackslash) {
        ++i;  // the escaped character, a quote included, is the string's
      } else if (k == kQuote) {
        in_string = false;
      }
      continue;
    }
    if (k == kQuote) {
      in_string = true;
    } else if (k == kOpen) {
      if (++depth > max_depth)
        return Status::invalid_argument(std::string(source) + ": values nested deeper than " +
                                        std::to_string(max_depth) + " levels");
    } else if (k == kClose && depth > 0) {
      --depth;
    }
  }
  return Status::ok();
}

}  // namespace prism
