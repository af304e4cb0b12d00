// Op: one entry of a role's program. A role lists its ops in issue order (the
// order the host thread would enqueue them); each op runs on one of the role's
// streams, after the previous op of that stream and after its explicit
// dependencies. Ops never name concrete ranks: communication names a
// communicator slot (graph/comm_slot.h) that each rank resolves through the
// layout. Fields are typed per kind; there is no attribute bag.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "util/units.h"
#include "util/vocab.h"

namespace prism {

enum class OpKind : std::uint8_t {
  kCompute,      // a kernel: fixed duration, or a KernelCost resolved by the compute model
  kCollective,   // NCCL collective over a group slot
  kSend,         // point-to-point send to a peer slot
  kRecv,         // point-to-point receive from a peer slot
  kAlloc,        // device memory allocation (caching allocator request)
  kFree,         // frees the allocation made by op `ref`
  kEventRecord,  // cudaEventRecord: completes when the stream reaches it
  kEventWait,    // cudaStreamWaitEvent: waits for the latest earlier record of the event
  kMarker,       // iteration / micro-batch / phase boundary; takes no time
};

// kIteration begins an iteration (and ends the previous one); kIterationEnd
// ends the current one without beginning another, so that what follows (a
// program's shutdown) is no iteration. Iteration times: replay/result.h.
enum class MarkerKind : std::uint8_t { kIteration, kMicrobatch, kPhase, kIterationEnd };

// What a compute op costs when it has no measured duration; the compute model
// turns it into time for the GPU being simulated.
enum class KernelClass : std::uint8_t { kGemm, kAttention, kElementwise, kOther };
struct KernelCost {
  KernelClass kernel_class = KernelClass::kOther;
  double flops = 0;      // floating-point operations
  Bytes bytes_accessed;  // HBM traffic
};

inline constexpr std::int32_t kNone = -1;

// What carries a communication op: NCCL (its kernels hold SMs while the
// transfer runs, and NCCL allocates its buffers and connections), or
// Transformer Engine's userbuffers (TP communication overlap: buffers
// registered once by the program, the copy engines or the few SMs the
// program set aside; the replay charges neither).
enum class Transport : std::uint8_t { kNccl, kUserbuffers };

struct Op {
  OpKind kind = OpKind::kCompute;
  CollectiveKind collective = CollectiveKind::kAllReduce;  // kCollective
  DType dtype = DType::kBFloat16;                          // kCollective, kSend, kRecv
  MarkerKind marker = MarkerKind::kIteration;              // kMarker
  std::uint16_t stream = 0;                                // index into Role::streams
  // kCollective: group slot; kSend/kRecv: peer slot; kEventRecord/kEventWait:
  // event id (index into Role::events); kFree: index of the freed kAlloc op.
  std::int32_t ref = kNone;
  // kSend/kRecv: tag; kCollective: root's index in the group (broadcast/reduce);
  // kMarker: iteration / micro-batch number; kFree: the streams the block was
  // recorded on (Tensor.record_stream), one bit per stream index < 31: the
  // block returns to the allocator when each of them has finished the ops
  // issued before the free.
  std::int32_t arg = 0;
  std::int32_t name = kNone;  // index into Role::names
  std::int32_t cost = kNone;  // kCompute without duration: index into Role::costs
  // NCCL group (ncclGroupStart/End): consecutive communication ops of one
  // stream with the same nonzero group start together and the stream moves on
  // when all of them are done.
  std::uint32_t group = 0;
  Transport transport = Transport::kNccl;  // kCollective, kSend, kRecv
  // Explicit dependencies: Role::deps[deps_begin, deps_end) are indices of
  // earlier-or-later ops of the same role that must complete first. Event waits
  // are resolved at load time into one such dependency on their record.
  std::uint32_t deps_begin = 0;
  std::uint32_t deps_end = 0;
  SimTime duration;  // kCompute with a fixed duration
  Bytes bytes;       // kCollective, kSend, kRecv, kAlloc, kFree (see docs/graph-format.md)
};

bool is_communication(OpKind k);

// kFree's record-stream mask (Op::arg) holds streams 0..kMaxRecordStream.
inline constexpr int kMaxRecordStream = 30;

std::string_view to_string(OpKind k);
std::string_view to_string(MarkerKind k);
std::string_view to_string(KernelClass k);
std::string_view to_string(Transport t);
std::optional<OpKind> parse_op_kind(std::string_view s);
std::optional<MarkerKind> parse_marker_kind(std::string_view s);
std::optional<KernelClass> parse_kernel_class(std::string_view s);
std::optional<Transport> parse_transport(std::string_view s);

}  // namespace prism
