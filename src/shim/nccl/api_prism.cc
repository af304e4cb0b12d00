// The drop-in's two exports that are not NCCL's: prismNcclMarker lets a
// frontend in the same process send iteration markers through the drop-in's
// connection, which is the rank's only one (docs/nccl-shim.md, "Iteration
// markers"). prism_torch calls it through ctypes when the NCCL drop-in
// carries a PyTorch program's communication (PRISM_NCCL_DROPIN=1).
// prismNcclFootprint says what NCCL's memory at full scale is now
// (docs/nccl-shim.md, "Memory").
#include <mutex>

#include "shim/nccl/shim.h"

using namespace prism::nccl;

extern "C" {

// code: 0 iteration begin, 1 iteration end, 2 micro-batch, 3 phase (as
// prism_marker). Before the rank has connected (no communicator yet) there
// is nothing to mark: ncclSuccess, nothing sent.
__attribute__((visibility("default"))) ncclResult_t prismNcclMarker(int code, int value) {
  constexpr const char* fn = "prismNcclMarker";
  if (code < 0 || code > 3)
    return failf(ncclInvalidArgument, fn, "marker code {} is not 0..3", code);
  return guarded(fn, [&] {
    Shim& shim = Shim::get();
    // Behind ops the GPU has not reached yet: sent by the progress thread.
    if (shim.device().defer_marker(code, value)) return ncclSuccess;
    std::lock_guard lock(shim.client_mu());
    prism_client* c = shim.connected();
    if (c == nullptr) return ncclSuccess;
    const prism_status s = prism_marker(c, code, value);
    return s == PRISM_OK ? ncclSuccess : shim.client_error(fn, s);
  });
}

// The device memory NCCL would hold now at full scale for this process's
// live communicators, as the coordinator said with the completions
// (*planned), and of it what the drop-in allocated on the GPU (*allocated;
// 0 on the host path without CUDA). Either pointer may be NULL.
__attribute__((visibility("default"))) ncclResult_t prismNcclFootprint(int64_t* planned,
                                                                       int64_t* allocated) {
  return guarded("prismNcclFootprint", [&] {
    std::int64_t p = 0, a = 0;
    Shim::get().nccl_memory(&p, &a);
    if (planned != nullptr) *planned = p;
    if (allocated != nullptr) *allocated = a;
    return ncclSuccess;
  });
}

}  // extern "C"
