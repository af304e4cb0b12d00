// Argument checks shared by the entry points, with NCCL's codes:
// ncclInvalidArgument for a bad value, ncclInvalidUsage for a call that is
// wrong at this point (a finalized communicator).
#include "shim/nccl/comm.h"

#include <limits>
#include <mutex>

#include "shim/nccl/shim.h"

namespace prism::nccl {
namespace {

// ncclDataType_t -> (prism_dtype, bytes). The graph format has no unsigned
// 32- and 64-bit types: they travel as the signed type of the same size.
constexpr DType kTypes[ncclNumTypes] = {
    {PRISM_INT8, 1},    {PRISM_UINT8, 1},    {PRISM_INT32, 4},       {PRISM_INT32, 4},
    {PRISM_INT64, 8},   {PRISM_INT64, 8},    {PRISM_FLOAT16, 2},     {PRISM_FLOAT32, 4},
    {PRISM_FLOAT64, 8}, {PRISM_BFLOAT16, 2}, {PRISM_FLOAT8_E4M3, 1}, {PRISM_FLOAT8_E5M2, 1},
};
static_assert(ncclInt8 == 0 && ncclUint8 == 1 && ncclInt32 == 2 && ncclUint32 == 3 &&
              ncclInt64 == 4 && ncclUint64 == 5 && ncclFloat16 == 6 && ncclFloat32 == 7 &&
              ncclFloat64 == 8 && ncclBfloat16 == 9 && ncclFloat8e4m3 == 10 &&
              ncclFloat8e5m2 == 11 && ncclNumTypes == 12);

}  // namespace

ncclResult_t check_comm(const char* fn, const ncclComm* comm) noexcept {
  if (comm == nullptr) return fail(ncclInvalidArgument, fn, "comm is NULL");
  if (comm->magic != ncclComm::kMagic) {
    return fail(ncclInvalidArgument, fn,
                "comm is not a live communicator (destroyed, or not made by ncclCommInitRank)");
  }
  return ncclSuccess;
}

ncclResult_t check_usable(const char* fn, const ncclComm* comm) noexcept {
  if (const ncclResult_t r = check_comm(fn, comm); r != ncclSuccess) return r;
  if (comm->finalized.load()) {
    return failf(ncclInvalidUsage, fn, "communicator {} was finalized (ncclCommFinalize)",
                 comm->handle);
  }
  return ncclSuccess;
}

ncclResult_t check_pointer(const char* fn, const void* p, const char* name) noexcept {
  if (p == nullptr) return failf(ncclInvalidArgument, fn, "{} is NULL", name);
  return ncclSuccess;
}

ncclResult_t check_dtype(const char* fn, ncclDataType_t t, DType* out) noexcept {
  const int v = static_cast<int>(t);
  if (v < 0 || v >= ncclNumTypes) {
    return failf(ncclInvalidArgument, fn, "datatype {} is not an ncclDataType_t (0..{})", v,
                 static_cast<int>(ncclNumTypes) - 1);
  }
  *out = kTypes[v];
  return ncclSuccess;
}

ncclResult_t check_op(const char* fn, ncclRedOp_t op, const ncclComm* comm) noexcept {
  const int v = static_cast<int>(op);
  if (v >= 0 && v < ncclNumOps) return ncclSuccess;
  bool known = false;
  try {
    std::lock_guard lock(Shim::get().state_mu());
    known = comm->custom_ops.contains(v);
  } catch (...) {  // a failed lock: treat the op as unknown
  }
  if (!known) {
    return failf(ncclInvalidArgument, fn,
                 "reduction op {} is neither built in (0..{}) nor made by "
                 "ncclRedOpCreatePreMulSum on this communicator",
                 v, static_cast<int>(ncclNumOps) - 1);
  }
  return ncclSuccess;
}

ncclResult_t check_rank(const char* fn, int rank, const ncclComm* comm, const char* what) noexcept {
  if (rank < 0 || rank >= comm->nranks) {
    return failf(ncclInvalidArgument, fn, "{} {} is outside the communicator's ranks 0..{}", what,
                 rank, comm->nranks - 1);
  }
  return ncclSuccess;
}

ncclResult_t byte_size(const char* fn, std::size_t count, const DType& t, int ranks,
                       std::int64_t* bytes) noexcept {
  const auto limit = static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max());
  const auto per = static_cast<std::size_t>(t.size) * static_cast<std::size_t>(ranks);
  if (count > limit / per) {
    return failf(ncclInvalidArgument, fn, "count {} of {}-byte elements is too large", count,
                 t.size);
  }
  *bytes = static_cast<std::int64_t>(count * per);
  return ncclSuccess;
}

}  // namespace prism::nccl
