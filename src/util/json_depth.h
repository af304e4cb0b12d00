// A guard for loaders of JSON from outside: how deeply a text nests its
// arrays and objects, checked before the text is parsed.
//
// nlohmann::json parses iteratively, but printing, copying or comparing a
// parsed value recurses, so a document nested a hundred thousand levels deep
// (a few hundred KiB of brackets) overflows the stack later, in whatever
// error path first prints it. No format PrismLLM reads nests more than a
// handful of levels, so loaders refuse such a text up front.
#pragma once

#include <cstddef>
#include <string_view>

#include "util/status.h"

namespace prism {

inline constexpr std::size_t kMaxJsonDepth = 64;

// "<source>: values nested deeper than <max_depth> levels" when an array or
// object of `text` opens deeper than `max_depth`, else ok. Brackets inside
// strings do not count; a malformed text is left to the parser's own error.
Status check_json_depth(std::string_view text, std::string_view source,
                        std::size_t max_depth = kMaxJsonDepth);

}  // namespace prism
