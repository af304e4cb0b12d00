// ProgramCapture: runs one real rank of a program that has no graph yet, and
// records what it does (slicing/capture_file.h), so that a graph can be built
// from it (slicing/capture_graph.h).
//
// The rank's virtual peers answer at once: each op completes when the rank
// enters it. What the capture measures is then the program's own time, its
// compute and host work, undisturbed by communication; the network's time
// is the replay's business once the graph exists. The rank still speaks the
// full protocol (docs/protocol.md), so the program runs unchanged between
// capture and emulation. The capture is the coordinator's live session
// (runtime/live_session.h) with this answering as its policy.
//
// Failures end the capture with one message naming the rank: a connection
// closed without a goodbye, silence past the timeout, a malformed or
// impossible message (an op on an undeclared communicator, time going back).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "graph/layout.h"
#include "runtime/comm_ids.h"
#include "slicing/capture_file.h"
#include "util/status.h"
#include "wire/address.h"

namespace prism::runtime {

struct ProgramCaptureOptions {
  Rank rank = 0;
  int world_size = 0;
  std::string job;
  // Not connected this long after the start, or silent this long, fails.
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
  // The captured rank's groups in the job's grid, one per dimension of more
  // than one rank, outermost first (as init_device_mesh names a job's mesh):
  // what a split by split_group's color, the lowest rank, is resolved
  // against (runtime/split_color.h). Empty: such splits are refused.
  std::vector<std::vector<std::int32_t>> grid_groups;
  std::string secret;  // the run's: hellos without it are refused
  // The members of communicators declared by size, position and id alone
  // (the NCCL drop-in's ncclCommInitRank), as the capture's rendezvous store
  // learns them; null: only the world's are known.
  std::shared_ptr<CommIds> comm_ids;
};

class ProgramCapture {
 public:
  explicit ProgramCapture(ProgramCaptureOptions options);
  ~ProgramCapture();
  ProgramCapture(const ProgramCapture&) = delete;
  ProgramCapture& operator=(const ProgramCapture&) = delete;

  Result<wire::Address> listen(const wire::Address& a);
  // Runs until the rank says goodbye. `tick` runs every few milliseconds; an
  // error from it (the rank's process died) ends the capture with it.
  Result<RankCapture> run(const std::function<Status()>& tick);
  bool connected() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace prism::runtime
