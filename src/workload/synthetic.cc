#include "workload/synthetic.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <iterator>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "graph/role_builder.h"
#include "graph/validate.h"

namespace prism {
namespace {

// Op names, each role's name table in this order.
enum class Name : std::int32_t {
  kAttentionForward,
  kMlpForward,
  kAttentionBackward,
  kMlpBackward,
  kTpAllReduce,
  kRecvActivation,
  kSendActivation,
  kRecvGrad,
  kSendGrad,
  kActivation,
  kGradSync,
  kParamGather,
  kOptimizer,
  kEvent,
  kMarker,
};
constexpr std::array<std::string_view, 15> kNames{
    "attention_fwd",   "mlp_fwd",         "attention_bwd", "mlp_bwd",   "tp_all_reduce",
    "recv_activation", "send_activation", "recv_grad",     "send_grad", "activation",
    "dp_grad_sync",    "dp_param_gather", "optimizer",     "event",     "marker",
};

constexpr std::uint16_t kComputeStream = 0;
constexpr std::uint16_t kDpStream = 1;
constexpr std::int32_t kTagActivation = 0;
constexpr std::int32_t kTagGrad = 1;

struct SlotIds {
  int tp, dp, pp_next, pp_prev;
};

// Writes the program of one pipeline stage into a Role.
class StageBuilder {
 public:
  StageBuilder(const Synthetic3DOptions& o, const SlotIds& slots, int stage, Role* role)
      : o_(o),
        slots_(slots),
        stage_(stage),
        role_(*role),
        b_("stage" + std::to_string(stage), {"compute", "dp"}) {
    num_buckets_ = (o.layers_per_stage + o.layers_per_bucket - 1) / o.layers_per_bucket;
  }

  void build();

 private:
  bool has_prev() const { return stage_ > 0; }
  bool has_next() const { return stage_ < o_.pp - 1; }
  // Event ids: one per gradient bucket, then the three below.
  std::int32_t grads_synced_event() const { return num_buckets_; }
  std::int32_t params_updated_event() const { return num_buckets_ + 1; }
  std::int32_t params_gathered_event() const { return num_buckets_ + 2; }

  static std::string_view name(Name n) { return kNames[static_cast<std::size_t>(n)]; }
  void compute(SimTime duration, Name n) { b_.compute(kComputeStream, duration, name(n)); }
  void collective(CollectiveKind kind, std::uint16_t stream, int slot, Bytes bytes, Name name);
  // A GEMM and, with tensor parallelism, the all-reduce of its output.
  void compute_then_tp_all_reduce(SimTime duration, Name name) {
    compute(duration, name);
    if (o_.tp > 1) {
      collective(CollectiveKind::kAllReduce, kComputeStream, slots_.tp, o_.tp_allreduce_bytes,
                 Name::kTpAllReduce);
    }
  }
  void event(OpKind kind, std::uint16_t stream, std::int32_t event) {
    const std::string& e = events_[static_cast<std::size_t>(event)];
    if (kind == OpKind::kEventRecord) {
      b_.record(stream, e, name(Name::kEvent));
    } else {
      b_.wait(stream, e, name(Name::kEvent));
    }
  }
  void marker(MarkerKind kind, std::int32_t number);
  void p2p(OpKind kind, int slot, std::int32_t tag, Name name, std::uint32_t group);

  // Megatron's p2p_communication helpers; each emits only the halves that
  // have a peer, and groups a send with a receive when both exist.
  void recv_forward() {
    if (has_prev()) {
      p2p(OpKind::kRecv, slots_.pp_prev, kTagActivation, Name::kRecvActivation, 0);
    }
  }
  void send_forward() {
    if (has_next()) {
      p2p(OpKind::kSend, slots_.pp_next, kTagActivation, Name::kSendActivation, 0);
    }
  }
  void recv_backward() {
    if (has_next()) {
      p2p(OpKind::kRecv, slots_.pp_next, kTagGrad, Name::kRecvGrad, 0);
    }
  }
  void send_backward() {
    if (has_prev()) {
      p2p(OpKind::kSend, slots_.pp_prev, kTagGrad, Name::kSendGrad, 0);
    }
  }
  void send_forward_recv_backward();
  void send_backward_recv_forward();

  void forward(int mb);
  void backward(int mb, bool sync_grads);
  void bucket_ready(int bucket, int num_layers);
  void optimizer_step();
  void one_f_one_b();

  const Synthetic3DOptions& o_;
  SlotIds slots_;
  int stage_;
  Role& role_;
  RoleBuilder b_;
  std::vector<std::string> events_;  // by event id
  int num_buckets_ = 0;
  std::uint32_t next_group_ = 1;
  // Alloc op of each (micro-batch, layer) activation, freed by its backward.
  std::vector<std::int32_t> activations_;
};

void StageBuilder::collective(CollectiveKind kind, std::uint16_t stream, int slot, Bytes bytes,
                              Name n) {
  b_.collective(stream, slot, kind, bytes, DType::kBFloat16, 0, name(n));
}

void StageBuilder::marker(MarkerKind kind, std::int32_t number) {
  b_.marker(kComputeStream, kind, number, name(Name::kMarker));
}

void StageBuilder::p2p(OpKind kind, int slot, std::int32_t tag, Name n, std::uint32_t group) {
  const int i = kind == OpKind::kSend ? b_.send(kComputeStream, slot, o_.p2p_bytes, tag, name(n))
                                      : b_.recv(kComputeStream, slot, o_.p2p_bytes, tag, name(n));
  b_.set_group(i, group);
}

void StageBuilder::send_forward_recv_backward() {
  if (!has_next()) {
    return;
  }
  const std::uint32_t group = next_group_++;
  p2p(OpKind::kSend, slots_.pp_next, kTagActivation, Name::kSendActivation, group);
  p2p(OpKind::kRecv, slots_.pp_next, kTagGrad, Name::kRecvGrad, group);
}

void StageBuilder::send_backward_recv_forward() {
  if (!has_prev()) {
    return;
  }
  const std::uint32_t group = next_group_++;
  p2p(OpKind::kSend, slots_.pp_prev, kTagGrad, Name::kSendGrad, group);
  p2p(OpKind::kRecv, slots_.pp_prev, kTagActivation, Name::kRecvActivation, group);
}

void StageBuilder::forward(int mb) {
  marker(MarkerKind::kMicrobatch, mb);
  for (int l = 0; l < o_.layers_per_stage; ++l) {
    if (o_.memory_ops) {
      activations_[static_cast<std::size_t>(mb) * o_.layers_per_stage + l] =
          b_.alloc(kComputeStream, o_.activation_bytes, name(Name::kActivation));
    }
    compute_then_tp_all_reduce(o_.attention_forward, Name::kAttentionForward);
    compute_then_tp_all_reduce(o_.mlp_forward, Name::kMlpForward);
  }
}

void StageBuilder::backward(int mb, bool sync_grads) {
  const int layers = o_.layers_per_stage;
  for (int k = 0; k < layers; ++k) {
    const int l = layers - 1 - k;
    compute_then_tp_all_reduce(o_.mlp_backward, Name::kMlpBackward);
    compute_then_tp_all_reduce(o_.attention_backward, Name::kAttentionBackward);
    if (o_.memory_ops) {
      b_.free_masked(kComputeStream, activations_[static_cast<std::size_t>(mb) * layers + l], 0,
                     name(Name::kActivation));
    }
    const bool bucket_full = (k + 1) % o_.layers_per_bucket == 0 || k == layers - 1;
    if (sync_grads && bucket_full) {
      bucket_ready(k / o_.layers_per_bucket, k % o_.layers_per_bucket + 1);
    }
  }
}

// The gradients of a bucket are final: reduce them on the dp stream while the
// compute stream carries on with the next layers (Megatron's overlap_grad_reduce).
void StageBuilder::bucket_ready(int bucket, int num_layers) {
  if (o_.dp <= 1) {
    return;
  }
  event(OpKind::kEventRecord, kComputeStream, bucket);
  event(OpKind::kEventWait, kDpStream, bucket);
  const Bytes bytes{o_.grad_bytes_per_layer.count * num_layers};
  collective(o_.distributed_optimizer ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce,
             kDpStream, slots_.dp, bytes, Name::kGradSync);
}

void StageBuilder::optimizer_step() {
  if (o_.dp > 1) {
    event(OpKind::kEventRecord, kDpStream, grads_synced_event());
    event(OpKind::kEventWait, kComputeStream, grads_synced_event());
  }
  compute(o_.optimizer_step, Name::kOptimizer);
  if (o_.dp <= 1 || !o_.distributed_optimizer) {
    return;
  }
  event(OpKind::kEventRecord, kComputeStream, params_updated_event());
  event(OpKind::kEventWait, kDpStream, params_updated_event());
  for (int b = 0; b < num_buckets_; ++b) {
    const int layers =
        std::min(o_.layers_per_bucket, o_.layers_per_stage - b * o_.layers_per_bucket);
    collective(CollectiveKind::kAllGather, kDpStream, slots_.dp,
               Bytes{o_.grad_bytes_per_layer.count * layers}, Name::kParamGather);
  }
  event(OpKind::kEventRecord, kDpStream, params_gathered_event());
  event(OpKind::kEventWait, kComputeStream, params_gathered_event());
}

// Megatron's forward_backward_pipelining_without_interleaving, unrolled.
void StageBuilder::one_f_one_b() {
  const int m = o_.microbatches;
  const int warmup = std::min(o_.pp - stage_ - 1, m);
  const int remaining = m - warmup;
  int fwd = 0, bwd = 0;
  for (int i = 0; i < warmup; ++i) {
    recv_forward();
    forward(fwd++);
    send_forward();
  }
  if (remaining > 0) {
    recv_forward();
  }
  for (int i = 0; i < remaining; ++i) {
    forward(fwd++);
    send_forward_recv_backward();
    backward(bwd, bwd == m - 1);
    ++bwd;
    if (i == remaining - 1) {
      send_backward();
    } else {
      send_backward_recv_forward();
    }
  }
  for (int i = 0; i < warmup; ++i) {
    recv_backward();
    backward(bwd, bwd == m - 1);
    ++bwd;
    send_backward();
  }
}

void StageBuilder::build() {
  // Every name and event is in the tables from the start, in this order.
  for (int b = 0; b < num_buckets_; ++b) events_.push_back("grad_ready_" + std::to_string(b));
  events_.insert(events_.end(), {"grads_synced", "params_updated", "params_gathered"});
  for (const std::string& e : events_) b_.event(e);
  for (std::string_view n : kNames) b_.name(n);
  activations_.assign(static_cast<std::size_t>(o_.microbatches) * o_.layers_per_stage, kNone);
  const std::size_t per_microbatch = 6 + 10 * static_cast<std::size_t>(o_.layers_per_stage);
  b_.reserve(static_cast<std::size_t>(o_.iterations) *
             (per_microbatch * o_.microbatches + 4 * static_cast<std::size_t>(num_buckets_) + 12));
  for (int it = 0; it < o_.iterations; ++it) {
    marker(MarkerKind::kIteration, it);
    one_f_one_b();
    optimizer_step();
  }
  role_ = std::move(b_).build();
}

Status check_options(const Synthetic3DOptions& o) {
  const std::pair<const char*, int> sizes[] = {
      {"tp", o.tp},
      {"pp", o.pp},
      {"dp", o.dp},
      {"gpus_per_node", o.gpus_per_node},
      {"layers_per_stage", o.layers_per_stage},
      {"microbatches", o.microbatches},
      {"iterations", o.iterations},
      {"layers_per_bucket", o.layers_per_bucket},
  };
  for (const auto& [name, value] : sizes) {
    if (value < 1) {
      return Status::invalid_argument(std::string("synthetic 3D: ") + name + " = " +
                                      std::to_string(value) + ", must be at least 1");
    }
  }
  const std::int64_t world = std::int64_t{o.tp} * o.pp * o.dp;
  if (world > std::numeric_limits<Rank>::max()) {
    return Status::invalid_argument("synthetic 3D: world size " + std::to_string(world) +
                                    " does not fit a rank number");
  }
  // Op indices are int32 (Op::ref of a free); double cannot overflow here.
  const double ops = static_cast<double>(o.iterations) * o.microbatches *
                     (6 + 10 * static_cast<double>(o.layers_per_stage));
  if (ops > std::numeric_limits<std::int32_t>::max() / 2.0) {
    return Status::invalid_argument("synthetic 3D: too many ops per role");
  }
  const SimTime times[] = {o.attention_forward, o.mlp_forward, o.attention_backward, o.mlp_backward,
                           o.optimizer_step};
  const Bytes sizes_in_bytes[] = {o.tp_allreduce_bytes, o.p2p_bytes, o.activation_bytes,
                                  o.grad_bytes_per_layer};
  if (std::any_of(std::begin(times), std::end(times), [](SimTime t) { return t.ns < 0; }) ||
      std::any_of(std::begin(sizes_in_bytes), std::end(sizes_in_bytes),
                  [](Bytes b) { return b.count < 0; })) {
    return Status::invalid_argument("synthetic 3D: negative duration or byte count");
  }
  return Status::ok();
}

std::vector<CommSlot> make_slots() {
  return {CommSlot::grid_group("tp", {0}), CommSlot::grid_group("dp", {1}),
          CommSlot::grid_peer("pp_next", 2, 1), CommSlot::grid_peer("pp_prev", 2, -1)};
}

}  // namespace

Result<ExecutionGraph> make_synthetic_3d(const Synthetic3DOptions& o) {
  PRISM_RETURN_IF_ERROR(check_options(o));
  ExecutionGraph g;
  g.name = "synthetic_tp" + std::to_string(o.tp) + "_pp" + std::to_string(o.pp) + "_dp" +
           std::to_string(o.dp);
  const int world = o.tp * o.pp * o.dp;
  g.layout = Layout(world, {{"tp", o.tp}, {"dp", o.dp}, {"pp", o.pp}}, o.gpus_per_node);
  g.slots = make_slots();
  const SlotIds slots{0, 1, 2, 3};
  g.roles.resize(o.pp);
  for (int s = 0; s < o.pp; ++s) {
    StageBuilder(o, slots, s, &g.roles[s]).build();
  }
  g.role_of_rank.resize(world);
  for (Rank r = 0; r < world; ++r) {
    g.role_of_rank[r] = g.layout.coord(r, 2);
  }
  PRISM_RETURN_IF_ERROR(finalize_graph(g).with_context("synthetic 3D"));
  PRISM_RETURN_IF_ERROR(validate_graph(g).with_context("synthetic 3D"));
  return g;
}

}  // namespace prism
