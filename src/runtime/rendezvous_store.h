// RendezvousStore: the torch.distributed TCPStore that a hybrid emulation's
// real ranks meet at (MASTER_ADDR:MASTER_PORT), hosted by PrismLLM, which
// answers for the virtual ranks.
//
// It speaks TCPStore's wire protocol in both of torch's dialects (1.13-2.1,
// and 2.2+ with its VALIDATE handshake), told apart per connection by the
// first query, and keeps the key-value store, blocking GET and WAIT, queues
// and watches as torch's own server does. On top of that (docs/rendezvous.md):
// - rank counters (TCPStore's "init/", store_based_barrier_key:*) count the
//   virtual ranks as arrived: an ADD that finds one absent adds the virtual
//   ranks' share first, so the count reaches the group's size exactly when
//   every real rank has added;
// - a communicator id (ncclUniqueId) that a virtual rank would publish is
//   synthesized, deterministically from its key, when a real rank asks;
// - a Gloo address that a virtual rank would publish cannot be: the asker is
//   closed and an error says so.
//
// Which global ranks a process group holds: the default group ("0") holds
// every rank in order; any other group must be declared, in StoreOptions or
// by a client SETting "prism/group/<name>" = "0,2,4" (any key prefix).
//
// Errors (refused Gloo groups, a communicator id whose publisher cannot be
// placed, an ADD it cannot do) reach the owner through
// StoreOptions::on_error, called on the store's thread, and errors(): they
// end an emulation. A client whose bytes are not TCPStore's protocol (an
// unknown query type, a query past the limits: anyone on the host can
// connect) is only dropped: closed, and named once through
// StoreOptions::on_drop and dropped(); the others are served on. One
// internal thread serves every client; the destructor stops it promptly,
// closing every connection.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "util/status.h"

namespace prism::runtime {

// What the store answers for an object a virtual rank sends
// (StoreOptions::object_answer).
struct ObjectAnswer {
  // kUnknown: a gathered object (all_gather_object, gather_object) that
  // cannot be known yet; the reader gets "PRISMUNK" and `error`, puts its own
  // object in that slot and says so, and the run goes on.
  enum class State { kReady, kPending, kFailed, kUnknown };
  State state = State::kPending;
  std::vector<std::uint8_t> bytes;  // kReady: the key's value
  std::string error;                // kFailed: why; the reader gets "PRISMERR" and this
};

struct StoreOptions {
  std::int32_t world_size = 0;
  // The global ranks that run for real; every other rank is virtual.
  std::vector<std::int32_t> real_ranks;
  // Process groups known up front: torch's group name -> global ranks in
  // group-rank order (as new_group sorts them).
  std::map<std::string, std::vector<std::int32_t>> groups;
  // TORCH_NCCL_RANKS_PER_ROOT of the real ranks, for ncclCommInitRankScalable
  // ids when a query does not name every root.
  std::int32_t nccl_ranks_per_root = 128;
  // A real rank that waits this long for a communicator id whose publisher
  // belongs to an undeclared group is reported; zero: never.
  std::chrono::milliseconds unknown_publisher_timeout{60000};
  // Objects (docs/torch-backend.md, "Objects"): prism_torch SETs what a
  // rank's send_object_list and broadcast_object_list send at
  // "prism/object/<src>/..." (any prefix), and the receivers GET it.
  // on_object receives each such SET (the key from "prism/object/" on, the
  // value), on the store's thread; must not block.
  std::function<void(const std::string&, const std::vector<std::uint8_t>&)> on_object;
  // Answers a GET of such a key, absent, whose sender is virtual (the key
  // from "prism/object/" on); kPending is asked again every
  // kObjectRetry. Unset: the GET waits, as for any absent key.
  std::function<ObjectAnswer(const std::string&)> object_answer;
  // Receives each NCCL id that a process group's communicator is made from
  // once it is known (published by a real rank or synthesized for a virtual
  // one; for ncclCommInitRankScalable, once every root's is): the FNV-1a hash
  // of its bytes (all roots' in root order), as the NCCL drop-in sends it,
  // and the communicator's global ranks in its rank order (runtime/comm_ids.h),
  // on the store's thread; must not block.
  std::function<void(std::uint64_t, const std::vector<std::int32_t>&)> on_comm_id;
  // Receives each error as it happens, on the store's thread; must not block.
  std::function<void(const std::string&)> on_error;
  // Receives each dropped client's description, likewise.
  std::function<void(const std::string&)> on_drop;
  // When set, receives a line for each NCCL id asked for or published (how
  // the key was read and who publishes it), each group declaration, and each
  // read left waiting for an absent key other than a barrier's (`prism
  // emulate` with PRISM_STORE_TRACE=1), likewise.
  std::function<void(const std::string&)> on_trace;
};

class RendezvousStore {
 public:
  // Listens on host:port (port 0: any free port; host "0.0.0.0" or "::" for
  // every interface) and starts serving. Fails on bad options or when the
  // address cannot be bound.
  static Result<std::unique_ptr<RendezvousStore>> start(const std::string& host, std::uint16_t port,
                                                        StoreOptions options);
  ~RendezvousStore();  // stops the thread and closes every connection
  RendezvousStore(const RendezvousStore&) = delete;
  RendezvousStore& operator=(const RendezvousStore&) = delete;

  std::uint16_t port() const { return port_; }
  // Every error so far, in order.
  std::vector<std::string> errors() const;
  // The clients dropped for malformed queries so far, in order (the first
  // kMaxDropped named; a client hammering the port costs no more memory).
  std::vector<std::string> dropped() const;
  static constexpr std::size_t kMaxDropped = 100;

 private:
  class Impl;
  RendezvousStore(std::unique_ptr<Impl> impl, std::uint16_t port);
  std::unique_ptr<Impl> impl_;
  std::uint16_t port_;
};

}  // namespace prism::runtime
