// Hands communication ops to the coordinator, and NCCL's group semantics.
//
// Host path: the op is entered when it is called (with its group's id
// inside ncclGroupStart/End), and waited for before the call returns, or,
// inside a group, at the outermost ncclGroupEnd. Entering at call time gives
// the coordinator every op of a group before this rank blocks on any of
// them, so a group's sends and receives cannot deadlock.
//
// GPU path: the ops are handed to the Device when they are called, or at
// the outermost ncclGroupEnd inside a group (NCCL enqueues nothing on the
// stream before it); one hold per stream and group. When the Device cannot
// hold a stream (a CUDA call failed), those ops take the host path.
//
// Group state is per thread, as NCCL's is.
#pragma once

#include <vector>

#include "prism/client.h"
#include "shim/nccl/comm.h"
#include "shim/nccl/mirror.h"

namespace prism::nccl {

// op: code, dtype, bytes, peer and tag set; comm, stream and group are set
// here. `copies` (mirror.h) run once the op has completed: on the stream
// after its release (GPU path), or after the wait (host path; in a group,
// at the outermost ncclGroupEnd).
ncclResult_t submit(const char* fn, ncclComm* comm, prism_op op, cudaStream_t stream,
                    std::vector<Copy> copies);

ncclResult_t group_start(const char* fn);
ncclResult_t group_end(const char* fn);

}  // namespace prism::nccl
