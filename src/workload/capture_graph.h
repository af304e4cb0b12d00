// The graph of a data-parallel program, built from one rank's capture.
//
// A job without a model section describes the user's own program (world
// size, cluster, parallel sizes). When the program is purely data-parallel
// (tensor, pipeline, context and expert sizes 1), every rank runs the same
// program on its own data: one role, and one real rank's captured run
// (docs/emulate.md, "Capture files") is that role's program. Communicators
// that span the world become group slots along the data-parallel
// dimension; a send to the rank k places ahead becomes a peer slot of
// offset k, wrapping, as every rank does the same.
//
// The capture's times become the program: the host's time between two of
// its messages is a compute op on a "host" stream; each communication op
// runs on a stream of its own (the client's stream id) after the host has
// reached it. A host that waited for an op (a wait naming it) depends on it
// there. An op whose completion the rank only learned from a deadline-bound
// wait (a progress thread polling), not from a wait naming it, is depended
// on at the rank's next iteration marker or its goodbye: the program's
// real wait for it (a future, a stream) is not visible on the wire.
#pragma once

#include <string>
#include <string_view>

#include "graph/graph.h"
#include "util/status.h"
#include "workload/job_spec.h"

namespace prism {

// Whether one rank's capture can describe `job`: no model section, and
// purely data-parallel. Checked before the program runs.
Status check_capturable(const JobSpec& job);

// `capture_json`: a "prism-capture" version 1 document; `source` names it in
// errors. The job must have no model section and be purely data-parallel;
// the capture's world size must be the job's.
Result<ExecutionGraph> graph_from_capture(const JobSpec& job, std::string_view capture_json,
                                          const std::string& source);

}  // namespace prism
