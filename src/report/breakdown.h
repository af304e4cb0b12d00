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
#include <vector>

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

// An interval of a rank's timeline charged to one category.
struct CategorySpan {
  SimTime begin, end;
  TimeCategory category = TimeCategory::kBubble;
};

// The timeline of rank `rank` over [begin, end) as maximal spans of one
// category, in time order; they tile it. `records` may hold other ranks'
// records (skipped). A compute op named "optimizer" counts as the
// optimizer. `measured` slices of the rank (a real rank's reported compute,
// no op of the graph) count as compute.
std::vector<CategorySpan> rank_spans(const ExecutionGraph& g, std::span<const TraceRecord> records,
                                     Rank rank, SimTime begin, SimTime end,
                                     std::span<const MeasuredSlice> measured = {});

// The categories of rank `rank` over [begin, end) (rank_spans summed); they
// add up to end - begin.
Breakdown rank_breakdown(const ExecutionGraph& g, std::span<const TraceRecord> records, Rank rank,
                         SimTime begin, SimTime end);
// `spans` summed per category.
Breakdown sum_spans(std::span<const CategorySpan> spans);

}  // namespace prism
