// Semantic checks of an ExecutionGraph, shared by the JSON loader and by
// in-memory builders.
//
// finalize_graph() derives what the file does not store (explicit slots'
// rank -> group tables, event waits resolved into dependencies on their record
// ops, free ops' byte counts) and must run before validate_graph().
// validate_graph() rejects: ops referring to missing streams, slots, events,
// names or costs; values past the limits below and in util/units.h
// (kMaxOpDuration, kMaxBytes, kMaxComputeScalePpm), so that a valid graph
// never overflows the replay's nanoseconds; dependencies that dangle or form a
// cycle, NCCL groups counted as one node; frees not ordered after their
// alloc; slots that do not resolve for a rank whose role uses them, or
// resolve to the rank itself; ranks without a role; collectives whose group
// members disagree on kind, size, dtype or order; sends and receives that do
// not pair up. Messages name role, op index and ranks.
#pragma once

#include "graph/graph.h"
#include "util/status.h"

namespace prism {

// The most floating-point operations one kernel's cost may count.
inline constexpr double kMaxCostFlops = 1e30;

Status finalize_graph(ExecutionGraph& g);
Status validate_graph(const ExecutionGraph& g);

}  // namespace prism
