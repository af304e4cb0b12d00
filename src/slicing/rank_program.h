// RankProgram: one rank's program as a trace records it, before it becomes
// part of an ExecutionGraph.
//
// Traces name concrete ranks: a collective runs on "this process group,
// whose members are ranks 8..15", a send goes to rank 17. A graph names
// slots instead (graph/comm_slot.h), so that ranks with the same program
// share a role. A RankProgram keeps the trace's view: its `role` is a
// complete Role (streams, ops, names, deps) except that
//   - a kCollective op's `ref` indexes `comms` (the rank's communicators),
//   - a kSend/kRecv op's `ref` indexes `peers` (global peer ranks),
// and assemble_graph() turns those into slots.
//
// Communicator keys are what makes two ranks' communicators "the same one"
// for role sharing: a key names the communicator independently of the rank
// ("tp", a process group's description, "world"); the members differ per
// rank. Ranks whose programs are equal once comms are compared by key and
// peers by their order of first use share one role.
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"
#include "util/status.h"

namespace prism {

struct ProgramComm {
  std::string key;            // rank-independent: becomes the slot's name
  std::vector<Rank> members;  // this rank's group, global ranks in communicator order
};

struct RankProgram {
  Rank rank = 0;
  Role role;                       // see above for kCollective/kSend/kRecv refs
  std::vector<ProgramComm> comms;  // kCollective ref -> here
  std::vector<Rank> peers;         // kSend/kRecv ref -> global peer rank
  std::string source;              // the trace it came from, for messages
};

// Builds the graph of `layout.world_size()` ranks from one program per rank
// (any order; each rank exactly once). Ranks whose programs are equal up to
// communicator and peer mapping share a role, named "<role_prefix><k>" in
// order of their lowest rank. Each communicator key becomes an explicit
// group slot holding every rank's group; each distinct (role, k-th peer)
// becomes an explicit peer slot. The result has passed finalize_graph and
// validate_graph; errors name the program's source and rank.
Result<ExecutionGraph> assemble_graph(std::string name, Layout layout,
                                      std::vector<RankProgram> programs,
                                      const std::string& role_prefix = "rank");

}  // namespace prism
