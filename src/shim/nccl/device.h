// Device: how a rank's communication ops wait for their emulated completion,
// and where ncclMemAlloc memory comes from.
//
// Two implementations:
// - the host device (no CUDA driver, or no CUDA context): every op takes
//   the host path, where the calling thread enters the op and waits for it
//   (or, in a group, ncclGroupEnd does), so NCCL looks synchronous;
// - the CUDA device (libcuda.so.1 loaded at run time with dlopen): an op on
//   a non-null stream of a thread with a current context takes the GPU path.
//   The stream is held by a wait on host-mapped memory, and a progress
//   thread enters the op when the stream reaches it and releases the wait at
//   its completion. The host thread never blocks on the coordinator.
// The drop-in never links libcuda or libcudart.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "prism/client.h"
#include "shim/nccl/entry.h"
#include "shim/nccl/mirror.h"

namespace prism::nccl {

class Device {
 public:
  virtual ~Device() = default;

  // Whether ops on `stream`, issued by the calling thread, take the GPU path.
  virtual bool holds_on(cudaStream_t stream) = 0;
  // GPU path: holds `stream` until ops[0..n) (prism_op, their comm, code,
  // bytes and group set) have all completed. They are entered when the
  // stream reaches them, so their virtual time is the GPU's, not the host's
  // that ran ahead. Returns at once. *held is false when the stream could
  // not be held (a CUDA call failed: the GPU path is then off for good) and
  // nothing was enqueued: the caller takes the host path. `copies`
  // (mirror.h) run on the stream once the wait is over, before its next
  // kernel, outside the kernel time reported.
  virtual ncclResult_t hold(const char* fn, cudaStream_t stream, const prism_op* ops, std::size_t n,
                            std::span<const Copy> copies, bool* held) = 0;
  // Host path: runs `copies` now, after the ops' wait (host memory, or any
  // memory CUDA's unified addressing reaches when a context is current).
  virtual ncclResult_t copy(const char* fn, std::span<const Copy> copies) = 0;
  // An iteration marker (prismNcclMarker) from the host: on the GPU path,
  // while an op the host held before it is not yet entered, the marker waits
  // and goes out after that op is entered and before any op held after it,
  // so that a rank's markers and ops reach the coordinator in the order the
  // program issued them, whatever the GPU's pace (two captures of one
  // program then agree op by op). Returns false when nothing is waiting to
  // be entered: the caller sends the marker now.
  virtual bool defer_marker(int code, int value) = 0;
  // Releases, without waiting, every held op of communicator `comm`
  // (ncclCommAbort).
  virtual void abandon(std::uint32_t comm) = 0;

  // The CUDA device of the calling thread's context, else `fallback`.
  virtual int cu_device(int fallback) = 0;
  // ncclMemAlloc / ncclMemFree: device memory with a context, else
  // page-aligned host memory; *on_device says which.
  virtual ncclResult_t mem_alloc(const char* fn, void** ptr, std::size_t bytes,
                                 bool* on_device) = 0;
  virtual ncclResult_t mem_free(const char* fn, void* ptr, bool on_device) = 0;

  // NCCL's own device memory at full scale (wire::Complete's nccl_bytes):
  // `bytes` of device memory in the calling thread's context, *ptr null
  // where there is no context (the host device: nothing is allocated). A
  // failed allocation (out of memory) is an error, as it is for NCCL.
  virtual ncclResult_t nccl_reserve(const char* fn, std::int64_t bytes, void** ptr) = 0;
  virtual void nccl_release(void* ptr) = 0;

  // Ends background work, at exit before the goodbye.
  virtual void stop() = 0;
};

std::unique_ptr<Device> make_host_device();
// Null when libcuda.so.1 or one of the driver functions is missing.
std::unique_ptr<Device> make_cuda_device();

// Page-aligned host memory, shared by both devices.
ncclResult_t host_alloc(const char* fn, void** ptr, std::size_t bytes) noexcept;

}  // namespace prism::nccl
