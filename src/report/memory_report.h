// How memory outcomes read: the out-of-memory message (worded like PyTorch's
// OutOfMemoryError, with the rank, op and NCCL's share added) and its JSON
// form, shared by `prism replay` and `prism simulate`.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "graph/graph.h"
#include "replay/result.h"

namespace prism {

// Several lines, each ending in '\n', indented by two spaces after the first.
std::string format_oom_text(const ExecutionGraph& g, const OutOfMemory& o);
nlohmann::ordered_json oom_json(const ExecutionGraph& g, const OutOfMemory& o);

}  // namespace prism
