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
// No data moves: receive buffers keep their contents.
#include "shim/nccl/comm.h"
#include "shim/nccl/submit.h"

namespace prism::nccl {
namespace {

struct Collective {
  prism_op_code code;
  const void* sendbuff;
  bool needs_send;  // sendbuff must not be NULL (when count > 0)
  const void* recvbuff;
  bool needs_recv;
  std::size_t count;
  ncclDataType_t datatype;
  bool times_nranks;  // bytes count the whole communicator's buffer
  int root = 0;       // broadcast, reduce
};

ncclResult_t issue(const char* fn, const Collective& a, ncclComm* comm, cudaStream_t stream) {
  DType t;
  PRISM_NCCL_TRY(check_dtype(fn, a.datatype, &t));
  if (a.code == PRISM_BROADCAST || a.code == PRISM_REDUCE)
    PRISM_NCCL_TRY(check_rank(fn, a.root, comm, "root"));
  if (a.count > 0 && a.needs_send) PRISM_NCCL_TRY(check_pointer(fn, a.sendbuff, "sendbuff"));
  if (a.count > 0 && a.needs_recv) PRISM_NCCL_TRY(check_pointer(fn, a.recvbuff, "recvbuff"));
  prism_op op{};
  op.code = static_cast<std::uint8_t>(a.code);
  op.dtype = t.code;
  PRISM_NCCL_TRY(byte_size(fn, a.count, t, a.times_nranks ? comm->nranks : 1, &op.bytes));
  op.peer = a.root;
  // As NCCL: a collective of no elements is checked, then does nothing (no
  // rank waits for another). Transfers of no bytes do take place.
  if (a.count == 0) return ncclSuccess;
  return submit(fn, comm, op, stream);
}

ncclResult_t point_to_point(const char* fn, prism_op_code code, const void* buff, std::size_t count,
                            ncclDataType_t datatype, int peer, ncclComm* comm,
                            cudaStream_t stream) {
  PRISM_NCCL_TRY(check_usable(fn, comm));
  DType t;
  PRISM_NCCL_TRY(check_dtype(fn, datatype, &t));
  PRISM_NCCL_TRY(check_rank(fn, peer, comm, "peer"));
  if (count > 0)
    PRISM_NCCL_TRY(check_pointer(fn, buff, code == PRISM_SEND ? "sendbuff" : "recvbuff"));
  prism_op op{};
  op.code = static_cast<std::uint8_t>(code);
  op.dtype = t.code;
  op.peer = peer;
  PRISM_NCCL_TRY(byte_size(fn, count, t, 1, &op.bytes));
  // A rank's transfer to itself is a local copy: nothing to emulate, and
  // the graph format has no such transfer.
  if (peer == comm->rank) return ncclSuccess;
  return submit(fn, comm, op, stream);
}

}  // namespace
}  // namespace prism::nccl

using namespace prism::nccl;

extern "C" {

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  constexpr const char* fn = "ncclAllReduce";
  return guarded(fn, [&] {
    PRISM_NCCL_TRY(check_usable(fn, comm));
    PRISM_NCCL_TRY(check_op(fn, op, comm));
    return issue(fn, {PRISM_ALL_REDUCE, sendbuff, true, recvbuff, true, count, datatype, false},
                 comm, stream);
  });
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  constexpr const char* fn = "ncclBroadcast";
  return guarded(fn, [&] {
    PRISM_NCCL_TRY(check_usable(fn, comm));
    // Only the root reads sendbuff.
    return issue(fn,
                 {PRISM_BROADCAST, sendbuff, comm->rank == root, recvbuff, true, count, datatype,
                  false, root},
                 comm, stream);
  });
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  constexpr const char* fn = "ncclBcast";
  return guarded(fn, [&] {
    PRISM_NCCL_TRY(check_usable(fn, comm));
    return issue(fn, {PRISM_BROADCAST, buff, true, buff, true, count, datatype, false, root}, comm,
                 stream);
  });
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  constexpr const char* fn = "ncclReduce";
  return guarded(fn, [&] {
    PRISM_NCCL_TRY(check_usable(fn, comm));
    PRISM_NCCL_TRY(check_op(fn, op, comm));
    // recvbuff may be NULL except on the root.
    return issue(
        fn,
        {PRISM_REDUCE, sendbuff, true, recvbuff, comm->rank == root, count, datatype, false, root},
        comm, stream);
  });
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  constexpr const char* fn = "ncclAllGather";
  return guarded(fn, [&] {
    PRISM_NCCL_TRY(check_usable(fn, comm));
    return issue(fn, {PRISM_ALL_GATHER, sendbuff, true, recvbuff, true, sendcount, datatype, true},
                 comm, stream);
  });
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  constexpr const char* fn = "ncclReduceScatter";
  return guarded(fn, [&] {
    PRISM_NCCL_TRY(check_usable(fn, comm));
    PRISM_NCCL_TRY(check_op(fn, op, comm));
    return issue(fn,
                 {PRISM_REDUCE_SCATTER, sendbuff, true, recvbuff, true, recvcount, datatype, true},
                 comm, stream);
  });
}

ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  constexpr const char* fn = "ncclAlltoAll";
  return guarded(fn, [&] {
    PRISM_NCCL_TRY(check_usable(fn, comm));
    return issue(fn, {PRISM_ALL_TO_ALL, sendbuff, true, recvbuff, true, count, datatype, true},
                 comm, stream);
  });
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  constexpr const char* fn = "ncclSend";
  return guarded(fn, [&] {
    return point_to_point(fn, PRISM_SEND, sendbuff, count, datatype, peer, comm, stream);
  });
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  constexpr const char* fn = "ncclRecv";
  return guarded(fn, [&] {
    return point_to_point(fn, PRISM_RECV, recvbuff, count, datatype, peer, comm, stream);
  });
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
