#include "util/text_error.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>

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

Status json_syntax_error(std::string_view text, std::string_view source, std::size_t byte,
                         std::string_view what) {
  std::string_view tail = what;
  if (std::size_t p = tail.find(": "); p != std::string_view::npos) tail = tail.substr(p + 2);
  if (!tail.starts_with("syntax error")) return text_error_at(text, source, byte, what);
  std::string words;
  if (byte == 0 || byte > text.size()) {
    words = "the text ends before the JSON value is complete";
  } else {
    const auto c = static_cast<unsigned char>(text[byte - 1]);
    if (c < 0x20 || c == 0x7f)
      words = fmt::format("control byte 0x{:02x} (escape it inside a string)", c);
    else if (c >= 0x80)
      words = fmt::format("ill-formed UTF-8 (byte 0x{:02x})", c);
    else
      words = fmt::format("unexpected '{}'", static_cast<char>(c));
  }
  return text_error_at(text, source, byte, ": malformed JSON: " + words);
}

Status json_value_error(std::string_view source, int id, std::string_view what) {
  if (id == 406)
    return Status::invalid_argument(fmt::format(
        "{}: malformed JSON: a number outside the range of a double (such as 1e400)", source));
  if (what.starts_with("[json.exception.")) {
    if (std::size_t p = what.find("] "); p != std::string_view::npos) what = what.substr(p + 2);
  }
  return Status::invalid_argument(fmt::format("{}: malformed JSON: {}", source, what));
}

}  // namespace prism
