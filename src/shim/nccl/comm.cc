// Argument checks shared by the entry points, with NCCL's codes:
// ncclInvalidArgument for a bad value, ncclInvalidUsage for a call that is
// wrong at this point (a finalized communicator).
#include "shim/nccl/comm.h"

#include <limits>
#include <mutex>

#include "prism/client.h"
#include "shim/nccl/shim.h"

namespace prism::nccl {
namespace {

// ncclDataType_t -> the graph format's type. It has no unsigned 32- and
// 64-bit types: they travel as the signed type of the same size.
constexpr DType kTypes[ncclNumTypes] = {
    DType::kInt8,    DType::kUint8,    DType::kInt32,      DType::kInt32,
    DType::kInt64,   DType::kInt64,    DType::kFloat16,    DType::kFloat32,
    DType::kFloat64, DType::kBFloat16, DType::kFloat8E4M3, DType::kFloat8E5M2,
};
static_assert(ncclInt8 == 0 && ncclUint8 == 1 && ncclInt32 == 2 && ncclUint32 == 3 &&
              ncclInt64 == 4 && ncclUint64 == 5 && ncclFloat16 == 6 && ncclFloat32 == 7 &&
              ncclFloat64 == 8 && ncclBfloat16 == 9 && ncclFloat8e4m3 == 10 &&
              ncclFloat8e5m2 == 11 && ncclNumTypes == 12);
// A prism_op carries the type as its prism_dtype number.
constexpr bool same_number(DType d, prism_dtype p) {
  return static_cast<int>(d) == static_cast<int>(p);
}
static_assert(same_number(DType::kFloat32, PRISM_FLOAT32) &&
              same_number(DType::kFloat16, PRISM_FLOAT16) &&
              same_number(DType::kBFloat16, PRISM_BFLOAT16) &&
              same_number(DType::kFloat8E4M3, PRISM_FLOAT8_E4M3) &&
              same_number(DType::kFloat8E5M2, PRISM_FLOAT8_E5M2) &&
              same_number(DType::kFloat64, PRISM_FLOAT64) &&
              same_number(DType::kInt8, PRISM_INT8) && same_number(DType::kUint8, PRISM_UINT8) &&
              same_number(DType::kInt32, PRISM_INT32) && same_number(DType::kInt64, PRISM_INT64));

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

ncclResult_t byte_size(const char* fn, std::size_t count, DType t, int ranks,
                       std::int64_t* bytes) noexcept {
  const auto limit = static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max());
  const int size = dtype_size(t);
  const auto per = static_cast<std::size_t>(size) * static_cast<std::size_t>(ranks);
  if (count > limit / per) {
    return failf(ncclInvalidArgument, fn, "count {} of {}-byte elements is too large", count, size);
  }
  *bytes = static_cast<std::int64_t>(count * per);
  return ncclSuccess;
}

}  // namespace prism::nccl
