// Entry points: collectives, point-to-point and groups.
//
// `bytes` follows the graph format (docs/graph-format.md): the size NCCL is
// called with as nccl-tests reports it, which is what the workload builder
// writes and the coordinator compares:
//   all_reduce, broadcast, reduce    count * size
//   all_gather                       sendcount * size * nranks (the gathered buffer)
//   reduce_scatter                   recvcount * size * nranks (the buffer reduced)
//   all_to_all                       count * size * nranks (count per peer)
//   send, recv                       count * size
// Data: receive buffers get this rank's own bytes, as if every peer held
// what it holds (mirror.h).
#include <optional>

#include "shim/nccl/comm.h"
#include "shim/nccl/submit.h"

namespace prism::nccl {
namespace {

// Which ranks must pass a buffer (not NULL when count > 0).
enum class Needs : std::uint8_t { kAll, kRoot };

// What a collective entry point enters, and which buffers it needs.
struct Collective {
  prism_op_code code;
  Needs send;
  Needs recv;
  bool times_nranks;  // bytes count the whole communicator's buffer
};
constexpr Collective kAllReduce{PRISM_ALL_REDUCE, Needs::kAll, Needs::kAll, false};
constexpr Collective kBroadcast{PRISM_BROADCAST, Needs::kRoot, Needs::kAll, false};
constexpr Collective kBcast{PRISM_BROADCAST, Needs::kAll, Needs::kAll, false};  // in place
constexpr Collective kReduce{PRISM_REDUCE, Needs::kAll, Needs::kRoot, false};
constexpr Collective kAllGather{PRISM_ALL_GATHER, Needs::kAll, Needs::kAll, true};
constexpr Collective kReduceScatter{PRISM_REDUCE_SCATTER, Needs::kAll, Needs::kAll, true};
constexpr Collective kAllToAll{PRISM_ALL_TO_ALL, Needs::kAll, Needs::kAll, true};

// A collective entry point: `op` for those that reduce, `root` (else 0)
// for broadcast and reduce.
ncclResult_t collective(const char* fn, const Collective& a, const void* sendbuff,
                        const void* recvbuff, std::size_t count, ncclDataType_t datatype,
                        std::optional<ncclRedOp_t> op, int root, ncclComm* comm,
                        cudaStream_t stream) noexcept {
  return guarded(fn, [&] {
    PRISM_NCCL_TRY(check_usable(fn, comm));
    if (op) PRISM_NCCL_TRY(check_op(fn, *op, comm));
    DType t{};
    PRISM_NCCL_TRY(check_dtype(fn, datatype, &t));
    if (a.code == PRISM_BROADCAST || a.code == PRISM_REDUCE)
      PRISM_NCCL_TRY(check_rank(fn, root, comm, "root"));
    const auto needed = [&](Needs n) {
      return count > 0 && (n == Needs::kAll || comm->rank == root);
    };
    if (needed(a.send)) PRISM_NCCL_TRY(check_pointer(fn, sendbuff, "sendbuff"));
    if (needed(a.recv)) PRISM_NCCL_TRY(check_pointer(fn, recvbuff, "recvbuff"));
    prism_op o{};
    o.code = static_cast<std::uint8_t>(a.code);
    o.dtype = static_cast<std::uint8_t>(t);
    PRISM_NCCL_TRY(byte_size(fn, count, t, a.times_nranks ? comm->nranks : 1, &o.bytes));
    o.peer = root;
    // As NCCL: a collective of no elements is checked, then does nothing (no
    // rank waits for another). Transfers of no bytes do take place.
    if (count == 0) return ncclSuccess;
    std::int64_t chunk = 0;
    PRISM_NCCL_TRY(byte_size(fn, count, t, 1, &chunk));
    std::vector<Copy> copies =
        mirror_copies(MirrorArgs{a.code, sendbuff, const_cast<void*>(recvbuff),
                                 static_cast<std::size_t>(chunk), comm->nranks, comm->rank, root});
    return submit(fn, comm, o, stream, std::move(copies));
  });
}

ncclResult_t point_to_point(const char* fn, prism_op_code code, const void* buff, std::size_t count,
                            ncclDataType_t datatype, int peer, ncclComm* comm,
                            cudaStream_t stream) noexcept {
  return guarded(fn, [&] {
    PRISM_NCCL_TRY(check_usable(fn, comm));
    DType t{};
    PRISM_NCCL_TRY(check_dtype(fn, datatype, &t));
    PRISM_NCCL_TRY(check_rank(fn, peer, comm, "peer"));
    if (count > 0)
      PRISM_NCCL_TRY(check_pointer(fn, buff, code == PRISM_SEND ? "sendbuff" : "recvbuff"));
    prism_op op{};
    op.code = static_cast<std::uint8_t>(code);
    op.dtype = static_cast<std::uint8_t>(t);
    op.peer = peer;
    PRISM_NCCL_TRY(byte_size(fn, count, t, 1, &op.bytes));
    // A rank's transfer to itself is a local copy: nothing to emulate, and
    // the graph format has no such transfer.
    if (peer == comm->rank) return ncclSuccess;
    return submit(fn, comm, op, stream, {});
  });
}

}  // namespace
}  // namespace prism::nccl

using namespace prism::nccl;

extern "C" {

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  return collective("ncclAllReduce", kAllReduce, sendbuff, recvbuff, count, datatype, op, 0, comm,
                    stream);
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  return collective("ncclBroadcast", kBroadcast, sendbuff, recvbuff, count, datatype, std::nullopt,
                    root, comm, stream);
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  return collective("ncclBcast", kBcast, buff, buff, count, datatype, std::nullopt, root, comm,
                    stream);
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return collective("ncclReduce", kReduce, sendbuff, recvbuff, count, datatype, op, root, comm,
                    stream);
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return collective("ncclAllGather", kAllGather, sendbuff, recvbuff, sendcount, datatype,
                    std::nullopt, 0, comm, stream);
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  return collective("ncclReduceScatter", kReduceScatter, sendbuff, recvbuff, recvcount, datatype,
                    op, 0, comm, stream);
}

ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return collective("ncclAlltoAll", kAllToAll, sendbuff, recvbuff, count, datatype, std::nullopt, 0,
                    comm, stream);
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return point_to_point("ncclSend", PRISM_SEND, sendbuff, count, datatype, peer, comm, stream);
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return point_to_point("ncclRecv", PRISM_RECV, recvbuff, count, datatype, peer, comm, stream);
}

ncclResult_t ncclGroupStart() {
  return guarded("ncclGroupStart", [] { return group_start("ncclGroupStart"); });
}

ncclResult_t ncclGroupEnd() {
  return guarded("ncclGroupEnd", [] { return group_end("ncclGroupEnd"); });
}

}  // extern "C"

PRISM_NCCL_ALIAS(ncclAllReduce)
PRISM_NCCL_ALIAS(ncclBroadcast)
PRISM_NCCL_ALIAS(ncclBcast)
PRISM_NCCL_ALIAS(ncclReduce)
PRISM_NCCL_ALIAS(ncclAllGather)
PRISM_NCCL_ALIAS(ncclReduceScatter)
PRISM_NCCL_ALIAS(ncclAlltoAll)
PRISM_NCCL_ALIAS(ncclSend)
PRISM_NCCL_ALIAS(ncclRecv)
PRISM_NCCL_ALIAS(ncclGroupStart)
PRISM_NCCL_ALIAS(ncclGroupEnd)
