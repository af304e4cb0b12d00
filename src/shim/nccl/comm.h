// The drop-in's communicator (what an ncclComm_t points to), its buffer
// registrations and windows, and the argument checks every entry point
// shares. A communicator is the coordinator's communicator `handle`
// (prism_comm_init) plus what NCCL's getters return. Mutable parts
// (registrations, custom reduction ops) are guarded by Shim's state lock:
// NCCL lets several threads use one communicator.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <set>

#include "shim/nccl/entry.h"
#include "util/vocab.h"

namespace prism::nccl {
struct Registration;
}  // namespace prism::nccl

struct ncclComm {
  // Set while the communicator lives: a destroyed or foreign pointer fails
  // the checks instead of being used (as NCCL's start/end magics do).
  static constexpr std::uint64_t kMagic = 0x6d6d6f434d535250;  // "PRSMComm"
  std::uint64_t magic = kMagic;
  std::uint32_t handle = 0;  // the coordinator's communicator
  int nranks = 0;
  int rank = 0;
  int cu_device = 0;
  std::atomic<bool> finalized{false};
  // A failure found in the background (GPU path) or a broken client.
  std::atomic<ncclResult_t> async_error{ncclSuccess};

  // Guarded by Shim::state_mu_.
  std::set<prism::nccl::Registration*> registrations;  // ncclCommRegister handles
  std::set<ncclWindow_t> windows;                      // ncclCommWindowRegister windows
  std::set<int> custom_ops;  // ncclRedOpCreatePreMulSum ids, >= ncclNumOps
  int next_op = ncclNumOps;
};

struct ncclWindow_vidmem {
  static constexpr std::uint64_t kMagic = 0x776f646e69574e50;  // "PNWindow"
  std::uint64_t magic = kMagic;
  void* buff = nullptr;
  std::size_t size = 0;
  int flags = 0;
};

namespace prism::nccl {

// What an ncclCommRegister handle points to.
struct Registration {
  void* buff = nullptr;
  std::size_t size = 0;
};

// ncclInvalidArgument (with the message) unless `comm` is a live
// communicator.
ncclResult_t check_comm(const char* fn, const ncclComm* comm) noexcept;
// check_comm, and ncclInvalidUsage once ncclCommFinalize was called.
ncclResult_t check_usable(const char* fn, const ncclComm* comm) noexcept;
ncclResult_t check_pointer(const char* fn, const void* p, const char* name) noexcept;

// The graph format's element type (prism::DType, numbered as prism_dtype)
// for an ncclDataType_t; ncclInvalidArgument for a value outside it.
ncclResult_t check_dtype(const char* fn, ncclDataType_t t, DType* out) noexcept;
// A built-in reduction, or one of comm's ncclRedOpCreatePreMulSum ops.
ncclResult_t check_op(const char* fn, ncclRedOp_t op, const ncclComm* comm) noexcept;
// `rank` names a rank of comm (a root or a peer).
ncclResult_t check_rank(const char* fn, int rank, const ncclComm* comm, const char* what) noexcept;
// count * dtype_size(t) * ranks in bytes, or ncclInvalidArgument when it
// overflows.
ncclResult_t byte_size(const char* fn, std::size_t count, DType t, int ranks,
                       std::int64_t* bytes) noexcept;

}  // namespace prism::nccl
