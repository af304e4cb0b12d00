// Internal to import_chakra() (chakra/import.cc): one rank's trace as a
// RankProgram (slicing/rank_program.h).
//
// A trace is a DAG of nodes with no streams; a program is ops on streams in
// issue order. The issue order is a topological order of the DAG, the lowest
// node id first among the ready ones (the order ASTRA-sim issues ready nodes
// in), so a trace whose ids already follow its dependencies keeps its order.
// Streams: a node's "stream" attribute when it has one (named from the
// GlobalMetadata's prism_streams list when present, else "stream<k>");
// otherwise GPU compute on "compute", CPU compute (is_cpu_op) on "cpu",
// collectives on "comm", sends on "send", receives on "recv", which keeps each
// kind in order as ASTRA-sim's one-at-a-time resources do. Every ctrl and data
// dependency becomes an explicit dependency unless stream order implies it.
// INVALID nodes and METADATA nodes that are not PrismLLM ops take no part:
// what depends on them depends on their dependencies instead.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "chakra/et_file.h"
#include "slicing/rank_program.h"

namespace prism::chakra {

// The key of the world communicator (pg_name empty or "0") until import
// names the communicators.
inline constexpr char kWorldPg[] = "0";

struct ImportContext {
  int world_size = 0;
  // Group file: pg_name -> members; null when there is no file.
  const std::unordered_map<std::string, std::vector<Rank>>* groups = nullptr;
  std::string groups_source;  // the group file, for messages
};

// `source`: the trace file. Collective comms are keyed by their pg_name
// (kWorldPg for the world), which import_chakra() turns into keys shared by
// ranks.
Result<RankProgram> rank_program(const EtFile& file, Rank rank, const ImportContext& ctx,
                                 const std::string& source);

}  // namespace prism::chakra
