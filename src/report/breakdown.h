// Where one rank's iteration went, by Megatron category: compute, optimizer,
// exposed communication per parallelism (TP, CP, EP, PP, DP) and the rest
// (pipeline bubble and waiting for peers). Computed from the rank's trace
// records (ReplayOptions::trace_ranks).
//
// At every instant exactly one category is charged: compute or the optimizer
// when a kernel runs (overlapped communication is hidden), otherwise the
// first of TP, CP, EP, PP, DP with data moving (a collective or send/recv
// whose members have all arrived), otherwise the bubble. Communication is
// categorized by its slot's name, as workload/megatron.h names them: "tp";
// "cp", "cp_next", "cp_prev"; "ep", "etp"; "pp_next", "pp_prev"; "dp_cp",
// "edp", "embd" (and any other slot starting with "dp").
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "graph/graph.h"
#include "replay/result.h"
#include "util/units.h"

namespace prism {

enum class TimeCategory : std::uint8_t { kCompute, kOptimizer, kTp, kCp, kEp, kPp, kDp, kBubble };
inline constexpr int kNumTimeCategories = 8;
std::string_view to_string(TimeCategory c);

// The category of communication on a slot called `slot_name`, if any.
std::optional<TimeCategory> comm_category(std::string_view slot_name);

struct Breakdown {
  std::array<SimTime, kNumTimeCategories> time{};
  SimTime& operator[](TimeCategory c) { return time[static_cast<int>(c)]; }
  SimTime operator[](TimeCategory c) const { return time[static_cast<int>(c)]; }
};

// The categories of rank `rank` over [begin, end); they add up to end - begin.
// `records` may hold other ranks' records (skipped). A compute op named
// "optimizer" counts as the optimizer.
Breakdown rank_breakdown(const ExecutionGraph& g, std::span<const TraceRecord> records, Rank rank,
                         SimTime begin, SimTime end);

}  // namespace prism
