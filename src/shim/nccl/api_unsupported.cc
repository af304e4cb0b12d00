// Entry points of NCCL 2.28 that the drop-in does not implement: each
// returns ncclInvalidUsage, and ncclGetLastError() names it. They exist so
// that a program linked against NCCL loads, and fails clearly only if it
// calls one.
//
// - ncclCommInitAll: one process driving several GPUs; a live rank is one.
// - ncclCommShrink, ncclCommRevoke: fault-tolerance; the emulated job has
//   no faults the program could react to.
// - ncclGather, ncclScatter: the graph format has no such collective.
// - ncclGroupSimulateEnd: NCCL's own cost estimate; use `prism collective`.
// - ncclDevCommCreate, ncclDevCommDestroy: the host side of NCCL 2.28's
//   device API (kernels that communicate by themselves,
//   nccl_device/core.h). PyPI's torch 2.x links them (symmetric memory), so
//   without them it cannot even be imported with the drop-in preloaded.
#include "shim/nccl/entry.h"

// After entry.h, which includes nccl.h with default visibility.
#pragma GCC visibility push(default)
#include <nccl_device/core.h>
#pragma GCC visibility pop

using prism::nccl::unsupported;

extern "C" {

ncclResult_t ncclCommInitAll(ncclComm_t*, int, const int*) {
  return unsupported("ncclCommInitAll");
}

ncclResult_t ncclCommRevoke(ncclComm_t, int) {
  return unsupported("ncclCommRevoke");
}

ncclResult_t ncclCommShrink(ncclComm_t, int*, int, ncclComm_t*, ncclConfig_t*, int) {
  return unsupported("ncclCommShrink");
}

ncclResult_t ncclGather(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) {
  return unsupported("ncclGather");
}

ncclResult_t ncclScatter(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t,
                         cudaStream_t) {
  return unsupported("ncclScatter");
}

ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t*) {
  return unsupported("ncclGroupSimulateEnd");
}

ncclResult_t ncclDevCommCreate(ncclComm_t, const ncclDevCommRequirements_t*, ncclDevComm_t*) {
  return unsupported("ncclDevCommCreate");
}

ncclResult_t ncclDevCommDestroy(ncclComm_t, const ncclDevComm_t*) {
  return unsupported("ncclDevCommDestroy");
}

// Deprecated in NCCL and returning nothing: the drop-in has no NCCL_DEBUG
// logging to reset, so it does nothing.
void ncclResetDebugInit() {}

}  // extern "C"

PRISM_NCCL_ALIAS(ncclCommInitAll)
PRISM_NCCL_ALIAS(ncclCommRevoke)
PRISM_NCCL_ALIAS(ncclCommShrink)
PRISM_NCCL_ALIAS(ncclGather)
PRISM_NCCL_ALIAS(ncclScatter)
PRISM_NCCL_ALIAS(ncclGroupSimulateEnd)
PRISM_NCCL_ALIAS(ncclDevCommCreate)
PRISM_NCCL_ALIAS(ncclDevCommDestroy)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
PRISM_NCCL_ALIAS(ncclResetDebugInit)
#pragma GCC diagnostic pop
