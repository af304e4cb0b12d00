// StageBuilder: writes the program of one pipeline stage for
// build_megatron() (workload/megatron.h). Internal to workload/: the layer
// ops live in megatron_layers.cc, the schedule, buckets and optimizer in
// megatron.cc.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "compute/kernel_model.h"
#include "graph/graph.h"
#include "workload/job_spec.h"
#include "workload/megatron.h"
#include "workload/megatron_shapes.h"

namespace prism::megatron {

enum Stream : std::uint16_t {
  kCompute,
  kDp,
  kSendFwd,
  kSendBwd,
  kRecvFwd,
  kRecvBwd,
  kCp,
};
inline const std::vector<std::string> kStreamNames = {
    "compute", "dp", "pp_send_fwd", "pp_send_bwd", "pp_recv_fwd", "pp_recv_bwd", "cp"};

constexpr std::int32_t kTagActivation = 0;
constexpr std::int32_t kTagGrad = 1;
constexpr std::int32_t kTagCpForward = 2;
constexpr std::int32_t kTagCpBackward = 3;

struct SlotIds {
  int tp = -1, cp = -1, dp_cp = -1, pp_next = -1, pp_prev = -1, cp_next = -1, cp_prev = -1;
  int ep = -1, etp = -1, edp = -1, embd = -1;
};

// A gradient bucket: consecutive layers (in backward order) of one chunk.
struct Bucket {
  std::int64_t params = 0;
  bool expert = false;
};

class StageBuilder {
 public:
  StageBuilder(const JobSpec& job, const KernelModel& kernels, const SlotIds& slots, int stage,
               std::map<std::string, KernelUse>* uses)
      : job_(job),
        km_(kernels),
        slots_(slots),
        x_(make_dims(job)),
        stage_(stage),
        p_(job.pp()),
        v_(job.vpp()),
        uses_(*uses) {
    role_.name = "stage" + std::to_string(stage);
    role_.streams = kStreamNames;
    if (x_.c == 1) role_.streams.pop_back();
    layers_per_chunk_ = job.layers_on_stage(stage) / v_;
    lp_ = layer_params(job, x_);
    JobSpec no_recompute = job;
    no_recompute.training.recompute = Recompute::kNone;
    recomputed_bytes_ = activation_bytes(no_recompute, x_, x_.moe);
  }

  Role build(RoleFootprint* footprint);

 private:
  bool first_chunk_here(int chunk) const { return stage_ == 0 && chunk == 0; }
  bool last_chunk_here(int chunk) const { return stage_ == p_ - 1 && chunk == v_ - 1; }
  bool has_input_peer(int chunk) const { return stage_ > 0 || chunk > 0; }
  bool has_output_peer(int chunk) const { return stage_ < p_ - 1 || chunk < v_ - 1; }

  Op& emit(OpKind kind, std::uint16_t stream, std::string_view name);
  std::int32_t intern(std::vector<std::string>* table,
                      std::unordered_map<std::string, std::int32_t>* index, std::string_view s);
  void kernel(const Kernel& k, std::string_view name);
  void gemm_fwd(std::int64_t m, std::int64_t n, std::int64_t k, std::string_view name,
                std::int64_t batch = 1);
  void gemm_bwd(std::int64_t m, std::int64_t n, std::int64_t k, std::string_view dgrad,
                std::string_view wgrad, std::int64_t batch = 1);
  void mem(std::string_view name, std::int64_t bytes) { kernel(memory_bound(name, bytes), name); }
  int collective(CollectiveKind kind, std::uint16_t stream, int slot, std::int64_t bytes,
                 std::string_view name, DType dtype = DType::kBFloat16);
  void p2p(OpKind kind, std::uint16_t stream, int slot, std::int64_t bytes, std::int32_t tag,
           std::string_view name, std::uint32_t group = 0);
  void record(std::uint16_t stream, std::string_view event);
  void wait(std::uint16_t stream, std::string_view event);
  int alloc(std::int64_t bytes, std::string_view name);
  void free(int alloc_op, std::string_view name);

  // TP collectives around a column-parallel (input) and a row-parallel
  // (output) linear layer, forward and backward.
  void tp_input_fwd();
  void tp_output_fwd();
  void tp_output_bwd();
  void tp_input_bwd();

  void attention_core(bool backward);
  void unfused_attention(bool backward);
  void layer_forward(bool moe);
  void layer_backward(bool moe);
  void mlp(bool backward, std::int64_t f_in, std::int64_t f_out, std::string_view prefix,
           std::int64_t m, std::int64_t batch);
  void moe_forward();
  void moe_backward();
  void embedding(bool backward);
  void output_layer(bool backward, int mb);

  void forward(int chunk, int mb);
  void backward(int chunk, int mb);
  void plan_buckets();
  void bucket_ready(int chunk, int item);
  int bucket_slot(const Bucket& bucket) const;
  void reduce_bucket(const Bucket& bucket);
  void param_gather(bool overlapped);
  void finish_iteration();

  const JobSpec& job_;
  const KernelModel& km_;
  SlotIds slots_;
  Dims x_;
  int stage_, p_, v_;
  int layers_per_chunk_ = 0;
  LayerParams lp_;
  std::map<std::string, KernelUse>& uses_;
  Role role_;
  std::unordered_map<std::string, std::int32_t> name_index_, event_index_;

  // Activations of (chunk, micro-batch, layer): the alloc op, freed in backward.
  std::vector<int> activations_;
  // Buckets per chunk, and which bucket closes after backward item i of the
  // chunk (items: output layer, layers last to first, embedding).
  std::vector<std::vector<Bucket>> buckets_;
  std::vector<std::vector<std::vector<int>>> closes_after_;
  std::vector<std::vector<int>> bucket_of_layer_;  // [chunk][layer]: dense bucket for param gather
  int num_buckets_ = 0;
  std::vector<bool> gathered_;  // per bucket id: params waited for already
  std::uint32_t next_group_ = 1;
  std::int64_t optimizer_params_ = 0;
  std::vector<int>
      logits_;  // per micro-batch: the logits' alloc op, from output forward to backward
  std::int64_t recomputed_bytes_ = 0;  // full recompute: a layer's activations, re-made
};

}  // namespace prism::megatron
