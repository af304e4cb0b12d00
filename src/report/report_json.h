// The machine-readable report of a replay (`prism replay --report FILE`).
//
// One JSON object with keys in a fixed order, so the same replay always gives
// the same bytes. Times are seconds (doubles converted exactly from the
// replay's integer nanoseconds), memory is bytes. docs/cli.md lists every
// field. Readers should check "format_version" (kReportFormatVersion).
#pragma once

#include <string>

#include "graph/graph.h"
#include "replay/result.h"

namespace prism {

inline constexpr int kReportFormatVersion = 1;

// Indented JSON text ending in a newline. `r` must come from replaying `g`.
std::string format_report_json(const ExecutionGraph& g, const ReplayResult& r);

}  // namespace prism
