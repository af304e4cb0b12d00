// Entry points: version and errors, unique ids, communicators' life and
// their getters. Each one decodes its arguments, checks them, hands over to
// the Shim and translates the outcome (docs/nccl-shim.md).
#include <strings.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "shim/nccl/comm.h"
#include "shim/nccl/shim.h"
#include "shim/nccl/unique_id.h"

namespace prism::nccl {
namespace {

constexpr unsigned kConfigMagic = 0xcafebeef;  // NCCL_CONFIG_INITIALIZER's
// No padding: an id, or an array of them, hashes as its bytes.
static_assert(sizeof(ncclUniqueId) == NCCL_UNIQUE_ID_BYTES);

ncclResult_t check_config(const char* fn, const ncclConfig_t* config) {
  if (config != nullptr && config->magic != kConfigMagic) {
    return fail(ncclInvalidArgument, fn,
                "config was not initialized with NCCL_CONFIG_INITIALIZER (bad magic)");
  }
  return ncclSuccess;
}

// NCCL_DEBUG=INFO (or TRACE), as NCCL's own: a line on stderr as each
// communicator is asked for and when it is made, to see where a rank waits.
bool debug_info() {
  static const bool on = [] {
    const char* v = std::getenv("NCCL_DEBUG");
    return v != nullptr && (strcasecmp(v, "INFO") == 0 || strcasecmp(v, "TRACE") == 0);
  }();
  return on;
}

// Connects, makes a handle and lets `declare(client, comm)` tell the
// coordinator about it (filling in what the answer says), then registers
// the communicator as *out.
template <typename Declare>
ncclResult_t make_comm(const char* fn, ncclComm_t* out, Declare&& declare) {
  Shim& shim = Shim::get();
  if (debug_info()) fmt::print(stderr, "PrismLLM NCCL INFO pid {}: {} called\n", ::getpid(), fn);
  std::lock_guard lock(shim.client_mu());
  prism_client* c = nullptr;
  PRISM_NCCL_TRY(shim.connect(fn, &c));
  auto comm = std::make_unique<ncclComm>();
  comm->handle = shim.next_comm_handle();
  const prism_status s = declare(c, *comm);
  if (s != PRISM_OK) return shim.client_error(fn, s);
  if (debug_info()) {
    fmt::print(stderr, "PrismLLM NCCL INFO pid {}: {}: communicator {} of {} ranks, position {}\n",
               ::getpid(), fn, comm->handle, comm->nranks, comm->rank);
  }
  shim.add_comm(comm.get());
  *out = comm.release();
  return ncclSuccess;
}

// Declares a communicator to the coordinator and makes its handle. The
// members' global ranks are not known (only the size and this rank's
// position), so the coordinator matches it among the job's communicators.
ncclResult_t init(const char* fn, ncclComm_t* out, int nranks, int rank, std::uint64_t id_hash,
                  const ncclConfig_t* config) {
  PRISM_NCCL_TRY(check_pointer(fn, out, "comm"));
  *out = nullptr;
  if (nranks < 1) return failf(ncclInvalidArgument, fn, "nranks {} is below 1", nranks);
  if (rank < 0 || rank >= nranks)
    return failf(ncclInvalidArgument, fn, "rank {} is outside 0..{}", rank, nranks - 1);
  PRISM_NCCL_TRY(check_config(fn, config));
  return make_comm(fn, out, [&](prism_client* c, ncclComm& comm) {
    Shim& shim = Shim::get();
    comm.nranks = nranks;
    comm.rank = rank;
    comm.cu_device = shim.device().cu_device(shim.local_rank());  // known once connected
    return prism_comm_init(c, comm.handle, nranks, rank, nullptr, id_hash);
  });
}

// Forgets the communicator and frees it with what it registered.
void release(ncclComm* comm) {
  Shim& shim = Shim::get();
  shim.remove_comm(comm);
  shim.release_nccl_memory(comm->handle);
  std::lock_guard lock(shim.state_mu());
  for (Registration* r : comm->registrations) delete r;
  for (ncclWindow_t w : comm->windows) delete w;
  comm->magic = 0;
  delete comm;
}

// A getter: *out = comm->*field once both are checked.
ncclResult_t get(const char* fn, const ncclComm* comm, int* out, const char* name,
                 int ncclComm::*field) noexcept {
  PRISM_NCCL_TRY(check_comm(fn, comm));
  PRISM_NCCL_TRY(check_pointer(fn, out, name));
  *out = comm->*field;
  return ncclSuccess;
}

}  // namespace
}  // namespace prism::nccl

using namespace prism::nccl;

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  constexpr const char* fn = "ncclGetVersion";
  PRISM_NCCL_TRY(check_pointer(fn, version, "version"));
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (ncclGetLastError has details)";
    case ncclSystemError:
      return "unhandled system error (ncclGetLastError has details)";
    case ncclInternalError:
      return "internal error - please report this issue to the PrismLLM developers";
    case ncclInvalidArgument:
      return "invalid argument (ncclGetLastError has details)";
    case ncclInvalidUsage:
      return "invalid usage (ncclGetLastError has details)";
    case ncclRemoteError:
      return "remote process exited or there was a network error (the emulation ended?)";
    case ncclInProgress:
      return "NCCL operation in progress";
    case ncclNumResults:
      break;
  }
  return "unknown result code";
}

const char* ncclGetLastError(ncclComm_t comm) {
  // An asynchronous error not yet read on this thread: its message.
  if (*last_error() == '\0' && comm != nullptr && comm->magic == ncclComm::kMagic &&
      comm->async_error.load() != ncclSuccess) {
    try {
      set_last_error(Shim::get().async_message());
    } catch (...) {  // keep ""
    }
  }
  return last_error();
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  PRISM_NCCL_TRY(check_pointer("ncclGetUniqueId", uniqueId, "uniqueId"));
  make_unique_id(uniqueId);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  constexpr const char* fn = "ncclCommInitRank";
  return guarded(fn, [&] {
    return init(fn, comm, nranks, rank, prism::fnv1a(&commId, sizeof(commId)), nullptr);
  });
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
  constexpr const char* fn = "ncclCommInitRankConfig";
  return guarded(fn, [&] {
    return init(fn, comm, nranks, rank, prism::fnv1a(&commId, sizeof(commId)), config);
  });
}

ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId* commIds, ncclConfig_t* config) {
  constexpr const char* fn = "ncclCommInitRankScalable";
  return guarded(fn, [&] {
    PRISM_NCCL_TRY(check_pointer(fn, commIds, "commIds"));
    if (nId < 1) return failf(ncclInvalidArgument, fn, "nId {} is below 1", nId);
    // The ids are contiguous: one hash over them all, in order.
    const std::uint64_t h =
        prism::fnv1a(commIds, sizeof(ncclUniqueId) * static_cast<std::size_t>(nId));
    return init(fn, newcomm, nranks, myrank, h, config);
  });
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config) {
  constexpr const char* fn = "ncclCommSplit";
  PRISM_NCCL_TRY(check_usable(fn, comm));
  PRISM_NCCL_TRY(check_pointer(fn, newcomm, "newcomm"));
  *newcomm = nullptr;
  if (color == NCCL_SPLIT_NOCOLOR) return ncclSuccess;  // not a member of any new communicator
  if (color < 0) {
    return failf(ncclInvalidArgument, fn, "color {} is negative and not NCCL_SPLIT_NOCOLOR", color);
  }
  PRISM_NCCL_TRY(check_config(fn, config));
  return guarded(fn, [&] {
    // The members depend on the colors of ranks that are virtual: the
    // coordinator picks the new communicator among the job's (docs/nccl-shim.md).
    return make_comm(fn, newcomm, [&](prism_client* c, ncclComm& split) {
      split.cu_device = comm->cu_device;
      return prism_comm_split(c, comm->handle, color, key, split.handle, &split.nranks, &split.rank,
                              nullptr, 0);
    });
  });
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  PRISM_NCCL_TRY(check_comm("ncclCommFinalize", comm));
  // Host-path ops are complete when their call returns; GPU-path ones
  // complete in the background whether or not the communicator lives.
  comm->finalized.store(true);
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  constexpr const char* fn = "ncclCommDestroy";
  if (comm == nullptr) return ncclSuccess;  // as NCCL
  PRISM_NCCL_TRY(check_comm(fn, comm));
  return guarded(fn, [&] {
    release(comm);
    return ncclSuccess;
  });
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  constexpr const char* fn = "ncclCommAbort";
  if (comm == nullptr) return ncclSuccess;
  PRISM_NCCL_TRY(check_comm(fn, comm));
  return guarded(fn, [&] {
    // Never waits for the coordinator: held streams are let go at once.
    Shim::get().device().abandon(comm->handle);
    release(comm);
    return ncclSuccess;
  });
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  constexpr const char* fn = "ncclCommGetAsyncError";
  PRISM_NCCL_TRY(check_comm(fn, comm));
  PRISM_NCCL_TRY(check_pointer(fn, asyncError, "asyncError"));
  *asyncError = comm->async_error.load();
  if (*asyncError != ncclSuccess) {
    return guarded(fn, [&] {
      set_last_error(Shim::get().async_message());
      return ncclSuccess;
    });
  }
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  return get("ncclCommCount", comm, count, "count", &ncclComm::nranks);
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  return get("ncclCommUserRank", comm, rank, "rank", &ncclComm::rank);
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  return get("ncclCommCuDevice", comm, device, "device", &ncclComm::cu_device);
}

}  // extern "C"

PRISM_NCCL_ALIAS(ncclGetVersion)
PRISM_NCCL_ALIAS(ncclGetErrorString)
PRISM_NCCL_ALIAS(ncclGetLastError)
PRISM_NCCL_ALIAS(ncclGetUniqueId)
PRISM_NCCL_ALIAS(ncclCommInitRank)
PRISM_NCCL_ALIAS(ncclCommInitRankConfig)
PRISM_NCCL_ALIAS(ncclCommInitRankScalable)
PRISM_NCCL_ALIAS(ncclCommSplit)
PRISM_NCCL_ALIAS(ncclCommFinalize)
PRISM_NCCL_ALIAS(ncclCommDestroy)
PRISM_NCCL_ALIAS(ncclCommAbort)
PRISM_NCCL_ALIAS(ncclCommGetAsyncError)
PRISM_NCCL_ALIAS(ncclCommCount)
PRISM_NCCL_ALIAS(ncclCommUserRank)
PRISM_NCCL_ALIAS(ncclCommCuDevice)
