#include "util/text_error.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
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

std::optional<std::size_t> first_bad_text_byte(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) return i;
    if (c < 0x80) {
      ++i;
      continue;
    }
    // Lead byte: how many continuation bytes, and the smallest code point
    // (no overlong forms), no surrogates, nothing past U+10FFFF.
    int n = 0;
    std::uint32_t cp = 0, min = 0;
    if ((c & 0xe0) == 0xc0) {
      n = 1;
      cp = c & 0x1f;
      min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
      n = 2;
      cp = c & 0x0f;
      min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
      n = 3;
      cp = c & 0x07;
      min = 0x10000;
    } else {
      return i;
    }
    if (i + static_cast<std::size_t>(n) >= s.size()) return i;  // cut short
    for (int k = 1; k <= n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]);
      if ((cc & 0xc0) != 0x80) return i;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
    i += static_cast<std::size_t>(n) + 1;
  }
  return std::nullopt;
}

namespace {

// Escapes control bytes and bytes that are not UTF-8 text in `s`.
std::string escaped(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    const std::optional<std::size_t> bad = first_bad_text_byte(s.substr(i));
    const std::size_t good = bad ? *bad : s.size() - i;
    out.append(s.substr(i, good));
    i += good;
    if (i == s.size()) break;
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\n') {
      out += ' ';
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned>(c));
      out += hex;
    }
    ++i;
  }
  return out;
}

}  // namespace

std::string printable_line(std::string_view message, std::size_t max_word, std::size_t max_line) {
  std::string line = escaped(message);
  std::string out;
  std::size_t i = 0;
  while (i < line.size()) {
    std::size_t end = line.find(' ', i);
    if (end == std::string::npos) end = line.size();
    const std::size_t n = end - i;
    if (n > max_word && n > 100) {
      out.append(line, i, 40);
      out += "...(" + std::to_string(n - 80) + " bytes)...";
      out.append(line, end - 40, 40);
    } else {
      out.append(line, i, n);
    }
    if (end < line.size()) out += ' ';
    i = end + 1;
  }
  if (out.size() > max_line) {
    const std::size_t more = out.size() - max_line;
    out.resize(max_line);
    out += "... (" + std::to_string(more) + " bytes more)";
  }
  return out;
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
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02x", static_cast<unsigned>(c));
    if (c < 0x20 || c == 0x7f)
      words = std::string("control byte ") + hex + " (escape it inside a string)";
    else if (c >= 0x80)
      words = std::string("ill-formed UTF-8 (byte ") + hex + ")";
    else
      words = std::string("unexpected '") + static_cast<char>(c) + "'";
  }
  return text_error_at(text, source, byte, ": malformed JSON: " + words);
}

Status json_value_error(std::string_view source, int id, std::string_view what) {
  if (id == 406)
    return Status::invalid_argument(
        std::string(source) +
        ": malformed JSON: a number outside the range of a double (such as 1e400)");
  if (what.starts_with("[json.exception.")) {
    if (std::size_t p = what.find("] "); p != std::string_view::npos) what = what.substr(p + 2);
  }
  return Status::invalid_argument(std::string(source) + ": malformed JSON: " + std::string(what));
}

}  // namespace prism
