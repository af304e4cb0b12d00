// A small hand-made graph and replay result shared by the report tests, so
// every number the writers print is known in advance.
//
// Layout: 4 ranks, dims tp=2 (innermost) then pp=2, one node. Ranks 0-1 are
// role "stage0", ranks 2-3 role "stage_one_long" (a longer name, to test
// column widths).
#pragma once

#include <utility>
#include <vector>

#include "graph/graph.h"
#include "replay/result.h"

namespace prism::testing {

inline constexpr std::int64_t kGiB = 1024LL * 1024 * 1024;

// Ops of stage0, by index.
enum Stage0Op {
  kIterationMarker = 0,
  kFwd = 1,
  kTpAllReduce = 2,
  kSendAct = 3,
  kAlloc = 4,
  kFree = 5,
  kBroadcast = 6,
};

inline Op make_op(OpKind kind, int stream, std::int32_t ref = kNone, Bytes bytes = {},
                  std::int32_t arg = 0) {
  Op o;
  o.kind = kind;
  o.stream = static_cast<std::uint16_t>(stream);
  o.ref = ref;
  o.bytes = bytes;
  o.arg = arg;
  return o;
}

inline ExecutionGraph make_report_graph() {
  ExecutionGraph g;
  g.name = "tiny";
  g.layout = Layout(4, {{"tp", 2}, {"pp", 2}}, 4);
  CommSlot tp;
  tp.name = "tp";
  tp.kind = CommSlot::Kind::kGroup;
  tp.dims = {0};
  CommSlot next;
  next.name = "pp_next";
  next.kind = CommSlot::Kind::kPeer;
  next.peer_dim = 1;
  next.offset = 1;
  CommSlot prev = next;
  prev.name = "pp_prev";
  prev.offset = -1;
  g.slots = {tp, next, prev};

  Role s0;
  s0.name = "stage0";
  s0.streams = {"compute", "comm"};
  s0.names = {"fwd"};
  s0.ops = {
      make_op(OpKind::kMarker, 0),
      make_op(OpKind::kCompute, 0),
      make_op(OpKind::kCollective, 1, 0, Bytes{1024}),
      make_op(OpKind::kSend, 1, 1, Bytes{2048}, 7),
      make_op(OpKind::kAlloc, 0, kNone, Bytes{4096}),
      make_op(OpKind::kFree, 0, kAlloc, Bytes{4096}),
      make_op(OpKind::kCollective, 1, 0, Bytes{64}, 1),
  };
  s0.ops[kFwd].name = 0;
  s0.ops[kFwd].duration = SimTime{1000};
  s0.ops[kTpAllReduce].dtype = DType::kFloat32;
  s0.ops[kSendAct].group = 5;
  s0.ops[kBroadcast].collective = CollectiveKind::kBroadcast;
  Role s1;
  s1.name = "stage_one_long";
  s1.streams = {"compute", "comm"};
  s1.ops = {make_op(OpKind::kRecv, 1, 2, Bytes{2048}, 7), make_op(OpKind::kCompute, 0)};
  g.roles = {std::move(s0), std::move(s1)};
  g.role_of_rank = {0, 0, 1, 1};
  return g;
}

// Memory: `peak_bytes` allocated, reserved 2 MiB more (1.5 MiB of it not
// allocated at the reserved peak, 512 KiB in split segments), device 1 GiB
// more of which 256 MiB is NCCL.
inline RankTimes times(std::int64_t compute_ns, std::int64_t comm_ns, std::int64_t idle_ns,
                       std::int64_t finish_ns, std::int64_t peak_bytes) {
  return RankTimes{SimTime{compute_ns},
                   SimTime{comm_ns},
                   SimTime{idle_ns},
                   SimTime{finish_ns},
                   Bytes{peak_bytes},
                   Bytes{peak_bytes + (2 << 20)},
                   Bytes{peak_bytes + (2 << 20) + kGiB},
                   Bytes{256 << 20},
                   Bytes{3 << 19},
                   Bytes{1 << 19}};
}

inline ReplayResult make_completed_result() {
  ReplayResult r;
  r.world_size = 4;
  r.folded = true;
  r.simulated_ranks = 2;
  r.op_events = 9;
  r.makespan = SimTime{12'345'678};
  r.iteration_times = {SimTime{12'345'678}};
  r.iteration_time = SimTime{12'345'678};
  r.roles = {
      RoleSummary{"stage0", 2, times(10'000'000, 1'000'000, 1'345'678, 12'345'678, 3 * kGiB / 2),
                  times(10'000'000, 1'000'000, 1'345'678, 12'345'678, 3 * kGiB / 2)},
      RoleSummary{"stage_one_long", 2, times(2000, 0, 12'345'178, 12'000'000, 1234),
                  times(501, 2, 12'345'179, 12'345'678, 2048)},
  };
  return r;
}

inline ReplayResult make_deadlock_result() {
  ReplayResult r = make_completed_result();
  r.outcome = ReplayResult::Outcome::kDeadlock;
  r.makespan = SimTime{1'500'000};
  r.iteration_times = {SimTime{1'500'000}};
  r.iteration_time = SimTime{1'500'000};
  r.blocked = {
      BlockedRank{0, 2, 0, kTpAllReduce, 1, "collective all_reduce #0 on tp: rank 9 not arrived"},
      BlockedRank{2, 1, 1, 0, 1, "recv from rank 0 tag 7: no matching send"},
  };
  return r;
}

// Rank 2 (role 1, two ranks alike) fails a 3 GiB alloc at 1 ms with 78 GiB
// reserved (77 allocated), 0.5 GiB NCCL and 0.5 GiB context on 80 GiB.
inline ReplayResult make_oom_result() {
  ReplayResult r = make_completed_result();
  r.outcome = ReplayResult::Outcome::kOutOfMemory;
  OutOfMemory o;
  o.rank = 2;
  o.num_ranks = 2;
  o.role = 1;
  o.op = 1;
  o.stream = 0;
  o.at = SimTime{1'000'000};
  o.requested = Bytes{3 * kGiB};
  o.allocator.requested = 3 * kGiB;
  o.allocator.rounded = 3 * kGiB;
  o.allocator.alloc_size = 3 * kGiB;
  o.usage = MemoryUsage{Bytes{77 * kGiB}, Bytes{78 * kGiB}, Bytes{kGiB / 2}, Bytes{kGiB / 2}};
  o.capacity = Bytes{80 * kGiB};
  r.oom = {o};
  return r;
}

}  // namespace prism::testing
