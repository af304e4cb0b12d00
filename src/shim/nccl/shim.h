// Shim: the drop-in's process-wide state. One client per process (the
// coordinator sees one live rank), connected lazily by the first
// communicator init from the environment `prism emulate` sets, closed with a
// goodbye at exit. It owns the communicators' registry, the stream ids, the
// memory ncclMemAlloc handed out, and the Device (host or CUDA) that holds
// ops until their emulated completion.
//
// Two locks, always taken in this order:
// - client_mu_ serializes every call on the client (it is not thread-safe)
//   and may be held across a blocking wait;
// - state_mu_ guards the small tables below and is never held across a
//   call that blocks, so ncclCommAbort and the GPU path's enqueue never wait
//   on the coordinator.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "prism/client.h"
#include "shim/nccl/comm.h"
#include "shim/nccl/device.h"
#include "shim/nccl/entry.h"

namespace prism::nccl {

class Shim {
 public:
  static Shim& get();

  // The client, connecting first when there is none: reads
  // PRISM_COORDINATOR, RANK, WORLD_SIZE, LOCAL_RANK and PRISM_TIMEOUT_MS.
  // Call with client_mu() held.
  ncclResult_t connect(const char* fn, prism_client** out);
  // The client when connected, else null. Call with client_mu() held.
  prism_client* connected() const { return client_; }
  // $LOCAL_RANK, once connected: the CUDA device a rank without a context
  // reports.
  int local_rank() const { return local_rank_; }
  std::mutex& client_mu() { return client_mu_; }
  std::mutex& state_mu() { return state_mu_; }

  // A failed client call: the error for `fn`, with the client's message.
  // Unless the drop-in passed a bad argument, the client is then broken,
  // and every communicator is marked (ncclCommGetAsyncError). Call with
  // client_mu() held.
  ncclResult_t client_error(const char* fn, prism_status s);
  // Records `code` as every live communicator's asynchronous error (the
  // client broke); `message` is what ncclGetLastError says after
  // ncclCommGetAsyncError reports it.
  void break_all(ncclResult_t code, const std::string& message);
  // The first asynchronous error's message ("" when none).
  std::string async_message();
  // The coordinator hung up (or broke the protocol): the emulation is over.
  // Unless the process ends by itself within $PRISM_NCCL_GONE_EXIT_S
  // seconds (default kGoneExitSeconds; 0: never), one error line naming
  // `message` goes to stderr and the process ends with exit status 1, so
  // that a program stuck in its own teardown (PyTorch waits up to its NCCL
  // timeout to abort communicators) never outlives its emulation for long.
  // Once per process; only in the process that connected.
  void end_if_left_running(const std::string& message);
  static constexpr int kGoneExitSeconds = 10;

  // The GPU path's progress thread waits for "any op", and may so spend a
  // ticket the host path entered in an open group. It parks it here, and
  // ncclGroupEnd takes it instead of waiting. Call with client_mu() held.
  void spent_elsewhere(std::uint64_t ticket) { spent_.push_back(ticket); }
  bool take_spent(std::uint64_t ticket);

  // Communicators by handle (for the GPU path's asynchronous errors).
  void add_comm(ncclComm* c);
  void remove_comm(ncclComm* c);
  void set_async_error(std::uint32_t handle, ncclResult_t code, const std::string& message);
  std::uint32_t next_comm_handle();

  // A small per-process id for a stream: 0 for the null stream, then 1, 2,
  // ... in order of first use (wrapping after 65535 distinct streams).
  std::uint16_t stream_id(cudaStream_t s);

  // Memory ncclMemAlloc handed out: its size and where it lives.
  void remember_alloc(void* p, std::size_t bytes, bool on_device);
  bool forget_alloc(void* p, std::size_t* bytes, bool* on_device);

  // NCCL's device memory at full scale. entered: op `ticket` belongs to
  // communicator `comm`; completed: the op completed, so its NCCL bytes (if
  // the coordinator sent any) are owed to `comm`. Both with client_mu()
  // held. reserve_owed: allocates what is owed, on the calling thread, which
  // must be the application's, in an NCCL call (as NCCL allocates in its
  // calls), never the GPU path's progress thread: that thread must stay free
  // to release held streams, and an allocation there was seen to stall a
  // PyTorch program on an H200. An allocation that fails (out of memory at
  // full scale) is the call's error and its communicator's.
  void entered(std::uint64_t ticket, std::uint32_t comm);
  void completed(std::uint64_t ticket);
  ncclResult_t reserve_owed(const char* fn);
  // ncclCommDestroy/Abort: NCCL frees the communicator's memory.
  void release_nccl_memory(std::uint32_t comm);
  // Bytes the coordinator said NCCL holds now (live communicators), and of
  // them the bytes allocated on the device.
  void nccl_memory(std::int64_t* planned, std::int64_t* allocated);

  Device& device() { return *device_; }

 private:
  Shim();
  static void at_exit();

  std::mutex client_mu_;
  prism_client* client_ = nullptr;
  bool exit_hook_ = false;
  int local_rank_ = 0;
  std::atomic<long> client_pid_{0};      // the process that connected
  std::atomic<bool> gone_armed_{false};  // end_if_left_running called
  std::vector<std::uint64_t> spent_;     // guarded by client_mu_

  std::mutex state_mu_;
  std::unordered_map<std::uint32_t, ncclComm*> comms_;
  std::uint32_t next_comm_ = 0;
  std::vector<std::pair<cudaStream_t, std::uint16_t>> streams_;
  std::uint16_t next_stream_ = 1;
  std::unordered_map<void*, std::pair<std::size_t, bool>> allocs_;
  std::unordered_map<std::uint64_t, std::uint32_t> op_comm_;  // ticket -> comm (client_mu_)
  struct NcclReserve {
    std::int64_t planned = 0, allocated = 0, owed = 0;
    std::vector<void*> blocks;
  };
  std::unordered_map<std::uint32_t, NcclReserve> nccl_;  // per communicator (state_mu_)
  // Some communicator owes bytes: every NCCL call asks, so the usual answer
  // (nothing) costs one load, not the lock and a walk over nccl_.
  std::atomic<bool> owed_any_{false};
  std::string broken_;

  std::unique_ptr<Device> device_;
};

}  // namespace prism::nccl
