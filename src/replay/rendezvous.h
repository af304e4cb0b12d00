// Rendezvous points of the replay engine: collectives meet per communicator
// instance by sequence number; sends and receives meet per channel (source,
// destination, tag) in order. Both only record who arrived and when; the
// engine decides what a complete meeting means.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "graph/layout.h"
#include "util/check.h"
#include "util/units.h"
#include "util/vocab.h"

namespace prism {

// A communication op that has arrived at a rendezvous.
struct Arrival {
  std::int32_t srank = 0;  // simulated rank
  std::uint16_t stream = 0;
  std::int32_t op = 0;
  SimTime at;
};

// One communicator as the engine simulates it: its member simulated ranks and
// the collectives in progress, indexed by sequence number.
class CollectiveRendezvous {
 public:
  CollectiveRendezvous(int slot, std::vector<std::int32_t> members, std::vector<Rank> real_ranks,
                       int multiplicity);

  int slot() const { return slot_; }
  const std::vector<std::int32_t>& members() const { return members_; }
  const std::vector<Rank>& real_ranks() const { return real_ranks_; }
  int num_nodes() const { return geometry_.num_nodes; }
  int max_ranks_per_node() const { return geometry_.max_ranks_per_node; }
  int multiplicity() const { return multiplicity_; }
  // Whether the network model already admitted collectives of kind `k` on
  // this communicator (NetworkModel::admit is asked once per kind).
  bool admitted(CollectiveKind k) const { return (admitted_ >> static_cast<unsigned>(k)) & 1U; }
  void set_admitted(CollectiveKind k) { admitted_ |= 1U << static_cast<unsigned>(k); }

  // Records arrival `a` at collective number `seq`; returns true when all
  // members have arrived (the arrivals are then in arrivals(seq)).
  bool arrive(std::int64_t seq, const Arrival& a);
  const std::vector<Arrival>& arrivals(std::int64_t seq) const { return slot_for(seq).arrivals; }
  // Forgets collective `seq` once it completed.
  void release(std::int64_t seq);
  // Collectives with some but not all members present (for deadlock reports).
  std::vector<std::int64_t> incomplete() const;

  void set_layout(const Layout& layout);

 private:
  struct Pending {
    std::int64_t seq = -1;  // -1: the entry is free
    bool done = false;      // completed, waiting for the ones before it
    std::vector<Arrival> arrivals;
  };
  const Pending& slot_for(std::int64_t seq) const;
  Pending& slot_for(std::int64_t seq);

  int slot_;
  std::vector<std::int32_t> members_;
  std::vector<Rank> real_ranks_;
  int multiplicity_;
  GroupGeometry geometry_{0, 1, 1};  // set by set_layout()
  std::uint32_t admitted_ = 0;       // a bit per CollectiveKind
  // Ring of collectives in progress: a member can be ahead of another by at
  // most one collective per stream, so the ring stays small.
  std::vector<Pending> ring_;
  std::int64_t base_ = 0;  // lowest sequence number not yet released
};

// Point-to-point channels keyed by (source, destination, tag, route), where
// the route tells apart messages between two simulated ranks that stand for
// different real pairs (see Engine::p2p_route; unfolded it is constant).
// Within a channel the n-th send pairs with the n-th receive, n counted in
// each side's issue order, whichever stream reaches it first.
class P2PRendezvous {
 public:
  struct Key {
    std::int32_t src, dst, tag, route;
    bool operator==(const Key&) const = default;
  };
  struct Match {
    Arrival send;
    Arrival recv;
  };
  // Posts send (is_send) or receive number `seq` of channel `k`; returns true
  // and fills `m` when its partner is already there.
  bool post(bool is_send, const Key& k, std::int64_t seq, const Arrival& a, Match* m);
  struct Unmatched {
    bool is_send;
    Key key;
    Arrival arrival;
  };
  // Ops still waiting for a partner, sorted by (rank, stream, op).
  std::vector<Unmatched> unmatched() const;

 private:
  // The posted ops not yet paired, as (sequence number, arrival): a channel
  // seldom holds more than a few, so a vector scanned beats a tree.
  struct Channel {
    std::vector<std::pair<std::int64_t, Arrival>> sends, recvs;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const {
      std::uint64_t h = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(k.src)) << 32) ^
                        static_cast<std::uint32_t>(k.dst);
      h ^= static_cast<std::uint64_t>(static_cast<std::uint32_t>(k.tag)) * 0x9e3779b97f4a7c15ULL;
      h ^= static_cast<std::uint64_t>(static_cast<std::uint32_t>(k.route)) * 0xc2b2ae3d27d4eb4fULL;
      return static_cast<std::size_t>(h ^ (h >> 29));
    }
  };
  // Looked up only; never iterated in an order that reaches the output.
  absl::flat_hash_map<Key, Channel, KeyHash> channels_;
};

}  // namespace prism
