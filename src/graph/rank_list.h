// Rank lists as people write them on a command line or in a graph file:
// "0-3,8,10-11" (comma-separated ranks and inclusive ranges). The graph file
// uses them to assign ranks to roles; the saver writes the compressed form.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "graph/layout.h"
#include "util/status.h"

namespace prism {

// Parses `text` into ascending ranks, each in [0, world_size). Rejects empty
// items, reversed ranges ("5-3") and ranks listed twice.
Result<std::vector<Rank>> parse_rank_list(std::string_view text, int world_size);

// Writes ascending, distinct `ranks` with runs of two or more as "a-b".
std::string format_rank_list(const std::vector<Rank>& ranks);

}  // namespace prism
