// The error for a parser that failed at a byte offset of a text: the source
// name with the line and column of that offset, "<source>:<line>:<col>: <what>".
#pragma once

#include <cstddef>
#include <string_view>

#include "util/status.h"

namespace prism {

// `byte` is 1-based, the position just past the character that failed (as
// nlohmann::json::parse_error::byte; 0 = the start). A prefix of `what` up to
// its first ": " (nlohmann's "[json.exception.parse_error.101] parse error at
// line 1, column 2: ") is dropped.
Status text_error_at(std::string_view text, std::string_view source, std::size_t byte,
                     std::string_view what);

}  // namespace prism
