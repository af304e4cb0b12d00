// Entry points: custom reduction ops, NCCL's allocator, buffer and window
// registration. None of them talks to the coordinator except ncclMemAlloc
// and ncclMemFree, which report the memory once the rank is connected.
// Registrations are bookkeeping only: the buffers are the program's own,
// whose memory the coordinator already counts from the graph.
#include <limits>
#include <memory>
#include <mutex>

#include "shim/nccl/comm.h"
#include "shim/nccl/shim.h"

namespace prism::nccl {
namespace {

// Reports an allocation (action 0) or a free (1) when connected.
ncclResult_t report_memory(const char* fn, int action, void* p, std::size_t bytes) {
  Shim& shim = Shim::get();
  std::lock_guard lock(shim.client_mu());
  prism_client* c = shim.connected();
  if (c == nullptr) return ncclSuccess;  // before the first communicator: nobody to tell
  const prism_status s = prism_memory(c, action, reinterpret_cast<std::uintptr_t>(p),
                                      static_cast<std::int64_t>(bytes), 0);
  return s == PRISM_OK ? ncclSuccess : shim.client_error(fn, s);
}

}  // namespace
}  // namespace prism::nccl

using namespace prism::nccl;

extern "C" {

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  constexpr const char* fn = "ncclRedOpCreatePreMulSum";
  return guarded(fn, [&] {
    PRISM_NCCL_TRY(check_usable(fn, comm));
    PRISM_NCCL_TRY(check_pointer(fn, op, "op"));
    PRISM_NCCL_TRY(check_pointer(fn, scalar, "scalar"));
    prism::DType t{};
    PRISM_NCCL_TRY(check_dtype(fn, datatype, &t));
    if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate) {
      return failf(ncclInvalidArgument, fn, "residence {} is not an ncclScalarResidence_t",
                   static_cast<int>(residence));
    }
    std::lock_guard lock(Shim::get().state_mu());
    if (comm->next_op == std::numeric_limits<int>::max())
      return fail(ncclInvalidUsage, fn, "no reduction op ids left on this communicator");
    const int id = comm->next_op++;
    comm->custom_ops.insert(id);
    *op = static_cast<ncclRedOp_t>(id);
    return ncclSuccess;
  });
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  constexpr const char* fn = "ncclRedOpDestroy";
  return guarded(fn, [&] {
    PRISM_NCCL_TRY(check_comm(fn, comm));
    const int v = static_cast<int>(op);
    if (v >= 0 && v < ncclNumOps) {
      return failf(ncclInvalidArgument, fn,
                   "op {} is built in; only ops made by ncclRedOpCreatePreMulSum are destroyed", v);
    }
    std::lock_guard lock(Shim::get().state_mu());
    if (comm->custom_ops.erase(v) == 0) {
      return failf(ncclInvalidArgument, fn,
                   "op {} was not made by ncclRedOpCreatePreMulSum on this communicator, or "
                   "was destroyed already",
                   v);
    }
    return ncclSuccess;
  });
}

ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  constexpr const char* fn = "ncclMemAlloc";
  return guarded(fn, [&] {
    PRISM_NCCL_TRY(check_pointer(fn, ptr, "ptr"));
    if (size == 0) return fail(ncclInvalidArgument, fn, "size is 0");
    Shim& shim = Shim::get();
    bool on_device = false;
    void* p = nullptr;
    PRISM_NCCL_TRY(shim.device().mem_alloc(fn, &p, size, &on_device));
    if (const ncclResult_t r = report_memory(fn, 0, p, size); r != ncclSuccess) {
      shim.device().mem_free(fn, p, on_device);
      return r;
    }
    shim.remember_alloc(p, size, on_device);
    *ptr = p;
    return ncclSuccess;
  });
}

ncclResult_t ncclMemFree(void* ptr) {
  constexpr const char* fn = "ncclMemFree";
  return guarded(fn, [&] {
    if (ptr == nullptr) return ncclSuccess;  // as free()
    Shim& shim = Shim::get();
    std::size_t bytes = 0;
    bool on_device = false;
    if (!shim.forget_alloc(ptr, &bytes, &on_device))
      return fail(ncclInvalidArgument, fn, "ptr was not allocated by ncclMemAlloc");
    PRISM_NCCL_TRY(shim.device().mem_free(fn, ptr, on_device));
    return report_memory(fn, 1, ptr, bytes);
  });
}

ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  constexpr const char* fn = "ncclCommRegister";
  return guarded(fn, [&] {
    PRISM_NCCL_TRY(check_usable(fn, comm));
    PRISM_NCCL_TRY(check_pointer(fn, buff, "buff"));
    PRISM_NCCL_TRY(check_pointer(fn, handle, "handle"));
    auto r = std::make_unique<Registration>(Registration{buff, size});
    std::lock_guard lock(Shim::get().state_mu());
    comm->registrations.insert(r.get());
    *handle = r.release();
    return ncclSuccess;
  });
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  constexpr const char* fn = "ncclCommDeregister";
  return guarded(fn, [&] {
    PRISM_NCCL_TRY(check_comm(fn, comm));
    PRISM_NCCL_TRY(check_pointer(fn, handle, "handle"));
    std::lock_guard lock(Shim::get().state_mu());
    auto* r = static_cast<Registration*>(handle);
    if (comm->registrations.erase(r) == 0) {
      return fail(ncclInvalidArgument, fn,
                  "handle is not a registration of this communicator (ncclCommRegister)");
    }
    delete r;
    return ncclSuccess;
  });
}

ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                    int winFlags) {
  constexpr const char* fn = "ncclCommWindowRegister";
  return guarded(fn, [&] {
    PRISM_NCCL_TRY(check_usable(fn, comm));
    PRISM_NCCL_TRY(check_pointer(fn, buff, "buff"));
    PRISM_NCCL_TRY(check_pointer(fn, win, "win"));
    if ((winFlags & ~NCCL_WIN_COLL_SYMMETRIC) != 0) {
      return failf(ncclInvalidArgument, fn,
                   "winFlags {:#x} has bits other than NCCL_WIN_COLL_SYMMETRIC", winFlags);
    }
    auto w = std::make_unique<ncclWindow_vidmem>();
    w->buff = buff;
    w->size = size;
    w->flags = winFlags;
    std::lock_guard lock(Shim::get().state_mu());
    comm->windows.insert(w.get());
    *win = w.release();
    return ncclSuccess;
  });
}

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  constexpr const char* fn = "ncclCommWindowDeregister";
  return guarded(fn, [&] {
    PRISM_NCCL_TRY(check_comm(fn, comm));
    PRISM_NCCL_TRY(check_pointer(fn, win, "win"));
    std::lock_guard lock(Shim::get().state_mu());
    if (comm->windows.erase(win) == 0) {
      return fail(ncclInvalidArgument, fn,
                  "win is not a window of this communicator (ncclCommWindowRegister)");
    }
    delete win;
    return ncclSuccess;
  });
}

}  // extern "C"

PRISM_NCCL_ALIAS(ncclRedOpCreatePreMulSum)
PRISM_NCCL_ALIAS(ncclRedOpDestroy)
PRISM_NCCL_ALIAS(ncclMemAlloc)
PRISM_NCCL_ALIAS(ncclMemFree)
PRISM_NCCL_ALIAS(ncclCommRegister)
PRISM_NCCL_ALIAS(ncclCommDeregister)
PRISM_NCCL_ALIAS(ncclCommWindowRegister)
PRISM_NCCL_ALIAS(ncclCommWindowDeregister)
