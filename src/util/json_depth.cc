#include "util/json_depth.h"

#include <string>

namespace prism {

Status check_json_depth(std::string_view text, std::string_view source, std::size_t max_depth) {
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, a quote included, is the string's
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth)
        return Status::invalid_argument(std::string(source) + ": values nested deeper than " +
                                        std::to_string(max_depth) + " levels");
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return Status::ok();
}

}  // namespace prism
