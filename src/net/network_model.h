// NetworkModel: how long communication takes. The replay engine knows only
// this narrow interface (SimGrid's shape): start a transfer, ask when the next
// one completes, take the completed ones. A model that shares bandwidth may
// move completion times of transfers in flight whenever one starts or ends;
// the engine always asks again. The model knows nothing of the IR: a transfer
// is a collective or point-to-point exchange over a set of global ranks.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "util/status.h"
#include "util/units.h"
#include "util/vocab.h"

namespace prism {

using TransferId = std::uint64_t;

struct Transfer {
  enum class Kind : std::uint8_t { kCollective, kPointToPoint };
  Kind kind = Kind::kCollective;
  CollectiveKind collective = CollectiveKind::kAllReduce;
  DType dtype = DType::kBFloat16;
  // Collective: the nccl-tests "size" (all-reduce / broadcast / reduce: the
  // buffer; all-gather: total output; reduce-scatter: total input; all-to-all:
  // total sent per rank). Point-to-point: the message.
  Bytes bytes;
  // Member ranks (global), communicator order; point-to-point: {src, dst}.
  std::span<const std::int32_t> ranks;
  int num_nodes = 1;           // distinct nodes among `ranks`
  int max_ranks_per_node = 1;  // largest number of members on one node
  // How many identical transfers this one stands for (folded replay), so a
  // model that shares bandwidth can account for the ones not simulated.
  int multiplicity = 1;
};

class NetworkModel {
 public:
  virtual ~NetworkModel() = default;
  // Begins `t` at `now` (never earlier than a previous call's `now`).
  virtual TransferId start(const Transfer& t, SimTime now) = 0;
  // Earliest completion among transfers in flight, SimTime::never() if none.
  virtual SimTime next_completion() const = 0;
  // Advances to `t` == next_completion(), removes the transfers completing
  // at `t` and appends their ids, in the order they were started. A model
  // may have events of its own (a transfer ending its latency and starting
  // to move data), so `done` may stay empty.
  virtual void take_completed(SimTime t, std::vector<TransferId>* done) = 0;
  // Whether folded replay gives the same times as unfolded: true when the
  // copies a folded transfer stands for (Transfer::multiplicity) never share
  // a resource with it. The replay unfolds when this is false.
  virtual bool folding_exact() const { return true; }
  // Whether the model can carry collective `t` at all; an error names what it
  // cannot (an NCCL selection that leaves a collective no algorithm, which
  // NCCL itself refuses at the call). The answer may depend on the
  // collective's kind and communicator, not its bytes: the replay asks once
  // per communicator and kind, and stops with the error.
  virtual Status admit(const Transfer& t) const {
    (void)t;
    return Status::ok();
  }
  // The SMs each member's NCCL kernel for `t` occupies while it runs: one
  // thread block per channel, each on its own SM; 0 for a model without
  // channels.
  virtual int sms_held(const Transfer& t) const {
    (void)t;
    return 0;
  }
};

}  // namespace prism
