#include "util/text_error.h"

#include <algorithm>
#include <string>

namespace prism {

Status text_error_at(std::string_view text, std::string_view source, std::size_t byte,
                     std::string_view what) {
  const std::size_t end = std::min<std::size_t>(byte == 0 ? 0 : byte - 1, text.size());
  std::size_t line = 1;
  std::size_t line_start = 0;
  for (std::size_t i = 0; i < end; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  if (std::size_t p = what.find(": "); p != std::string_view::npos) what = what.substr(p + 2);
  std::string message(source);
  message += ':' + std::to_string(line) + ':' + std::to_string(end - line_start + 1) + ": ";
  message += what;
  return Status::invalid_argument(message);
}

}  // namespace prism
