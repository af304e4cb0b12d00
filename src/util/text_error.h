// The error for a parser that failed at a byte offset of a text: the source
// name with the line and column of that offset, "<source>:<line>:<col>: <what>".
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "util/status.h"

namespace prism {

// `byte` is 1-based, the position just past the character that failed (as
// nlohmann::json::parse_error::byte; 0 = the start). A prefix of `what` up to
// its first ": " (nlohmann's "[json.exception.parse_error.101] parse error at
// line 1, column 2: ") is dropped.
Status text_error_at(std::string_view text, std::string_view source, std::size_t byte,
                     std::string_view what);

// The index of the first byte of `s` that is not well-formed UTF-8 or is a
// control character (below 0x20, or 0x7f); nullopt when there is none. For
// names that end up in reports (JSON, which must be UTF-8) and terminals.
std::optional<std::size_t> first_bad_text_byte(std::string_view s);

// `message` as one printable line for a terminal: a newline becomes a space,
// other control bytes and bytes that are not UTF-8 become \xNN, a run of
// more than `max_word` bytes without a space (a quoted value from a file: a
// key of megabytes) keeps its first and last 40 bytes around "...(N bytes)",
// and the whole is cut at `max_line` bytes, saying how much was left out.
std::string printable_line(std::string_view message, std::size_t max_word = 200,
                           std::size_t max_line = 4096);

// A JSON parser's failure at `byte` (as text_error_at) in PrismLLM's words:
// "<source>:<line>:<col>: malformed JSON: <what is there>" ("the text ends
// before the JSON value is complete", "unexpected 'x'", "control byte 0x01",
// "ill-formed UTF-8 (byte 0xff)"). nlohmann's own syntax-error text, which
// quotes what it read raw, is never shown; a message that is not nlohmann's
// syntax error (a loader's own, carried by the exception) is kept.
Status json_syntax_error(std::string_view text, std::string_view source, std::size_t byte,
                         std::string_view what);
// The other exceptions a JSON parse throws, by nlohmann's id: 406, a number
// outside a double's range (1e400), in PrismLLM's words; any other with
// nlohmann's "[json.exception.<kind>.<id>] " prefix dropped.
// "<source>: malformed JSON: <what>".
Status json_value_error(std::string_view source, int id, std::string_view what);

}  // namespace prism
