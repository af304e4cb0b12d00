#include "net/alpha_beta.h"

namespace prism {
namespace {

// Huge latencies or tiny bandwidths (both valid options) must not overflow.
SimTime clamped(Int128 ns) {
  return ns < kMaxOpDuration.ns ? SimTime{static_cast<std::int64_t>(ns)} : kMaxOpDuration;
}

}  // namespace

SimTime AlphaBetaModel::duration(const Transfer& t) const {
  const bool inter = t.num_nodes > 1;
  const Bandwidth bw = inter ? p_.inter_node_bw : p_.intra_node_bw;
  const SimTime alpha = inter ? p_.inter_node_latency : p_.intra_node_latency;
  if (t.kind == Transfer::Kind::kPointToPoint) {
    return clamped(static_cast<Int128>(alpha.ns) + bw.time_for(t.bytes).ns);
  }

  const std::int64_t n = static_cast<std::int64_t>(t.ranks.size());
  if (n <= 1) return SimTime::zero();
  // bytes moved per rank = bytes * num / den; latency steps as a ring does them.
  std::int64_t num = 1, den = 1, steps = n - 1;
  switch (t.collective) {
    case CollectiveKind::kAllReduce:
      num = 2 * (n - 1), den = n, steps = 2 * (n - 1);
      break;
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllToAll:
      num = n - 1, den = n;
      break;
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kReduce:
      break;
    case CollectiveKind::kBarrier:
      num = 0, steps = 2 * (n - 1);
      break;
  }
  const Bytes moved{static_cast<std::int64_t>(static_cast<Int128>(t.bytes.count) * num / den)};
  return clamped(static_cast<Int128>(alpha.ns) * steps + bw.time_for(moved).ns);
}

TransferId AlphaBetaModel::start(const Transfer& t, SimTime now) {
  const TransferId id = next_id_++;
  in_flight_.push(InFlight{now + duration(t), id});
  return id;
}

SimTime AlphaBetaModel::next_completion() const {
  return in_flight_.empty() ? SimTime::never() : in_flight_.top().end;
}

void AlphaBetaModel::take_completed(SimTime t, std::vector<TransferId>* done) {
  while (!in_flight_.empty() && in_flight_.top().end == t) {
    done->push_back(in_flight_.top().id);
    in_flight_.pop();
  }
}

}  // namespace prism
