// The collective metadata PyTorch records for each c10d call (internal to
// src/kineto): the args of a record_param_comms host op, which Kineto copies
// onto the NCCL kernel the call launched. Reads the kind, size, element
// type, process group and peer, and turns them into what a RankProgram needs:
// bytes as the graph format counts them, a rank-independent communicator key
// and the group's global ranks.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "graph/op.h"
#include "kineto/trace_events.h"
#include "slicing/rank_program.h"
#include "util/status.h"

namespace prism::kineto {

struct CommCall {
  OpKind kind = OpKind::kCollective;  // kCollective, kSend or kRecv
  CollectiveKind collective = CollectiveKind::kAllReduce;
  DType dtype = DType::kBFloat16;
  Bytes bytes;
  std::int32_t root = 0;  // broadcast / reduce: index in the group
  ProgramComm comm;       // kCollective: key and members
  Rank peer = kNone;      // kSend / kRecv: the global peer rank
};

struct CommContext {
  Rank rank = 0;
  int world_size = 1;
  const DistributedInfo* dist = nullptr;
};

// NCCL's kernels: "ncclKernel_..." (NCCL < 2.19), "ncclDevKernel_...".
bool is_nccl_kernel(std::string_view name);
// Whether `args` carry collective metadata ("Collective name").
bool has_comm_metadata(const Json* args);

// Reads one call. `args` holds the metadata (a kernel's or a host op's);
// `host_args`, when not null, is the record_param_comms op that launched the
// kernel, consulted for what the kernel's args lack (its "Rank": the root of
// a broadcast, the peer of a send). `kernel` names the NCCL kernel (empty for
// a host op): its name gives the kind when the metadata's does not. `at`
// names the event in messages.
Result<CommCall> read_comm_call(const Json* args, const Json* host_args, std::string_view kernel,
                                const CommContext& ctx, const std::string& at);

}  // namespace prism::kineto
