// NcclMemory: the device memory NCCL takes outside PyTorch's caching
// allocator, as the replay reaches it. PyTorch creates a process group's
// communicator on its first collective, and NCCL (2.22+, NCCL_RUNTIME_CONNECT=1)
// connects an algorithm's buffers the first time a collective needs that
// algorithm, and a peer's point-to-point buffers on the first send/recv with
// it. So a rank's NCCL memory grows as the replay goes, by exactly the
// communicators, algorithms, channels and peers it uses, plus NCCL's
// once-per-process share at the first communicator; the formulas and their
// sources are in mem/nccl_footprint.h and docs/memory.md.
//
// Point-to-point transfers run, as PyTorch's single send/recv do, on a
// two-rank communicator of the pair (ProcessGroupNCCL's "low:high" key):
// its init is counted once per peer, with the p2p buffers of the direction
// used. All-to-all is p2p with every peer of the collective's communicator.
#pragma once

#include <cstdint>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "mem/nccl_footprint.h"
#include "net/nccl_tuner.h"
#include "net/network_model.h"

namespace prism {

class NcclMemory {
 public:
  // `tuner` picks the algorithm, protocol and channels of each collective as
  // the network model does; it must outlive this object.
  NcclMemory(const NcclTuner& tuner, NcclFootprintConfig config = {});

  void reset(int num_simulated_ranks);
  // Transfer `t` starts with simulated rank `srank` as a member. `comm` is
  // the communicator's id in the replay (collectives), or the peer's global
  // rank (point-to-point). Returns the bytes NCCL allocates on this rank now:
  // communicator init on first use, plus the buffers of a newly connected
  // algorithm or peer; zero when everything is connected already.
  std::int64_t on_transfer(std::uint32_t srank, std::int64_t comm, const Transfer& t);
  // The same for a collective on all members of communicator `comm` at
  // once, as the replay starts one: what it needs is the same on every
  // member, and so is every member's state for the communicator (each takes
  // part in each of its collectives), so both are worked out once. A
  // communicator is connected either this way or member by member through
  // on_transfer, not both.
  struct Need {
    NcclCommShape shape;
    NcclLinks links{};
  };
  Need collective_need(const Transfer& t) const;
  struct GroupConnect {
    std::int64_t bytes = 0;  // on every member
    bool init = false;       // the communicator's first collective
  };
  GroupConnect connect_group(std::int64_t comm, const Need& need);
  // What member `srank` allocates for `c`: c.bytes, plus NCCL's share of
  // the process when this is the member's first communicator.
  std::int64_t member_bytes(std::uint32_t srank, const GroupConnect& c);
  // Bytes allocated so far on `srank`.
  std::int64_t bytes(std::uint32_t srank) const { return bytes_[srank]; }

  // NCCL's view of a communicator of `g` on this cluster (exposed for tests
  // and docs).
  NcclCommShape shape(const CommGeometry& g) const;
  // The connection a collective of `k` and `bytes` on `g` needs.
  NcclConnection connection(CollectiveKind k, Bytes bytes, const CommGeometry& g) const;

 private:
  // One communicator on one rank: initialized, and bytes per link set.
  struct CommState {
    bool initialized = false;
    NcclLinks links{};
  };
  // Brings `st` up to `need`: the bytes that takes, without the process share.
  std::int64_t connect(CommState& st, const NcclCommShape& s, const NcclLinks& need) const;
  std::int64_t connect(std::uint32_t srank, std::uint64_t key, const NcclCommShape& s,
                       const NcclLinks& need);

  const NcclTuner& tuner_;
  NcclFootprintConfig config_;
  std::vector<std::int64_t> bytes_;
  std::vector<std::uint32_t> num_comms_;  // per simulated rank: communicators initialized
  // Per simulated rank: communicator key (replay comm id, or a flag bit and
  // the peer for point-to-point) to its state. Looked up, never iterated.
  std::vector<absl::flat_hash_map<std::uint64_t, CommState>> comms_;
  std::vector<CommState> groups_;  // by replay comm id, for connect_group
};

}  // namespace prism
