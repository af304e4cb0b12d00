// A captured rank's program, and the graph of a job built from captures.
//
// A job without a model section describes the user's own program (world
// size, cluster, parallel sizes); its graph is built from captures of the
// program's ranks (docs/emulate.md, "Capture files"), one per role
// (workload/slices.h). program_from_capture() reads one capture.
//
// The capture's times become the program: the host's time between two of
// its messages is a compute op on a "host" stream; each communication op
// runs on a stream of its own (the client's stream id) after the host has
// reached it. A host that waited for an op (a wait naming it) depends on it
// there. An op whose completion the rank only learned from a deadline-bound
// wait (a progress thread polling), not from a wait naming it, is depended
// on at the rank's next iteration marker or its goodbye: the program's
// real wait for it (a future, a stream) is not visible on the wire. A
// receive is the exception: its data is what the host goes on with (a
// blocking recv, or irecv's wait before the tensor is used), so the host's
// next op depends on it however its completion was learned.
//
// Communicators keep their members (global ranks, in communicator order),
// and a send's or receive's peer becomes a global rank, as a RankProgram
// (workload/rank_program.h) holds them.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "graph/graph.h"
#include "util/status.h"
#include "workload/job_spec.h"
#include "workload/rank_program.h"

namespace prism {

// Whether captures can describe `job`: it has no model section. Checked
// before the program runs.
Status check_capturable(const JobSpec& job);

// `capture_json`: a "prism-capture" version 1 document of a rank in a world
// of `world_size` ranks; `source` names it in errors and in the program.
Result<RankProgram> program_from_capture(std::string_view capture_json, const std::string& source,
                                         int world_size);
// The same, of a document already parsed.
Result<RankProgram> program_from_capture(const nlohmann::json& doc, const std::string& source,
                                         int world_size);

// The graph of `job` (no model section) from one rank's capture: every
// role of the job's layout must be that rank's (a data-parallel program,
// or one whose only role is the captured rank's).
Result<ExecutionGraph> graph_from_capture(const JobSpec& job, std::string_view capture_json,
                                          const std::string& source);

}  // namespace prism
