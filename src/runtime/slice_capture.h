// The captures of a program that has no graph yet (a job without a model
// section): one rank per role runs the program with virtual peers that
// answer at once (runtime/program_capture.h), and the job's graph is built
// from what they did (slicing/slices.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "runtime/object_payloads.h"
#include "runtime/real_ranks.h"
#include "simulation/job.h"
#include "slicing/slices.h"
#include "util/status.h"

namespace prism::runtime {

struct SliceCaptureRun {
  std::vector<Rank> real;  // the emulation's real ranks: each role's own, where it has one
  std::vector<std::string> program;
  RankEnvironment env;     // coordinator: ignored (each capture listens on its own socket)
  std::string socket_dir;  // a private directory for the captures' sockets
  std::string slices_dir;  // when set, each capture is written there as slice-rank<N>.json
  int jobs = 1;            // captures run side by side (each with a free port for its store)
  // Each role of more than one rank is also captured as a second rank (its
  // last, or its first when the last is the representative), checked
  // against the representative op by op before any emulation: a
  // rank-dependent program is found here, not mid-run.
  bool verify = true;
  std::vector<Rank> also{};  // more ranks to capture and check (--capture-ranks)
  // When set, receives every object the captured ranks send
  // (runtime/object_payloads.h); a captured rank that receives one from a
  // virtual rank is answered from what the captures recorded.
  std::shared_ptr<ObjectPayloads> objects{};
};

// Builds the graph of a program's job (no model section) from captures:
// for each role of the job's layout (slicing/slices.h), one rank runs
// the program with virtual peers that answer at once
// (runtime/program_capture.h), run.jobs captures at a time in role order,
// with progress on stderr. Each role's rank is its lowest real rank, else
// its lowest rank; with run.verify a second rank of each role, and the
// ranks of run.also, are captured too and checked against it (the role
// table says by whom). A role whose captured ranks differ is split
// (slicing/role_split.h): the ranks that tell its candidate rules apart are
// captured too, and the coarsest rule that fits every capture splits it;
// where none fits, the error names two ranks that differ and their first
// differing op. The first capture to fail stops the others; its error is
// the one returned (the lowest role's, when several fail on their own).
Result<SlicedGraph> capture_slices(const PreparedJob& p, const SliceCaptureRun& run);

}  // namespace prism::runtime
