// CommIds: which global ranks a communicator holds, by the id it was made
// from, as the rendezvous store learns it.
//
// A real rank that makes a communicator with ncclCommInitRank (or
// ncclCommInitRankScalable) through the NCCL drop-in says only its size, its
// position and the FNV-1a hash of the ncclUniqueId bytes (all roots' ids, in
// root order, for the scalable init). The rendezvous store sees each id as it
// is published or synthesized for a virtual root, under a key that names the
// process group, and the group's ranks are declared to it: so it records
// hash -> members here (StoreOptions::on_comm_id), and the capture and the
// coordinator read the members of a communicator that did not say them.
//
// Thread-safe: the store's thread records, the capture's or coordinator's
// thread reads.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

namespace prism::runtime {

// How long the capture and the coordinator wait for an id the store has
// not recorded yet before they go on without its members.
inline constexpr std::chrono::milliseconds kCommIdWait{1000};

class CommIds {
 public:
  // Records (or replaces) the members of the communicator made from the id
  // whose hash is `id_hash`.
  void record(std::uint64_t id_hash, std::vector<std::int32_t> members);
  // Its members; empty when the id is not known within `wait` (torch's
  // TCPStore SET does not wait for the store, so a rank that published an id
  // can declare the communicator before the store has read the SET).
  std::vector<std::int32_t> members(std::uint64_t id_hash,
                                    std::chrono::milliseconds wait = std::chrono::milliseconds(0));
  // The members of the communicator of `nranks` that global rank `rank`
  // declared at `position` from the id `id_hash`, waiting up to kCommIdWait
  // for the id; empty when it is not known, or when what is known does not
  // hold `rank` at `position` (another communicator's id, a hash collision).
  std::vector<std::int32_t> members_of(std::uint64_t id_hash, int nranks, int position,
                                       std::int32_t rank);

 private:
  std::mutex mu_;
  std::condition_variable recorded_;
  std::map<std::uint64_t, std::vector<std::int32_t>> members_;
};

}  // namespace prism::runtime
