#include "workload/megatron.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "compute/slowest_gpu.h"
#include "graph/validate.h"
#include "net/cluster_yaml.h"
#include "util/check.h"
#include "workload/megatron_stage.h"

namespace prism {
namespace megatron {

// A kernel's time is looked up (database or curve) once per distinct
// signature of the job; later uses reuse it.
SimTime StageBuilder::kernel_time(const Kernel& k) {
  std::string sig = signature(k);
  auto [it, first_use] = uses_.try_emplace(sig);
  KernelUse& use = it->second;
  if (first_use) {
    use.signature = std::move(sig);
    use.time = km_.time(k);
    use.source = km_.source(k);
    use.measured = use.source != KernelSource::kModel;
  }
  ++use.count;
  return use.time;
}

void StageBuilder::kernel(const Kernel& k, std::string_view name) {
  b_.compute(kCompute, kernel_time(k), name);
}

void StageBuilder::gemm_fwd(std::int64_t m, std::int64_t n, std::int64_t k, std::string_view name,
                            std::int64_t batch) {
  kernel(gemm(m, n, k, x_.gemm_dtype, batch), name);
}

// Y[m,n] = X[m,k] W[k,n]: dX = dY W^T is (m, k, n); dW = X^T dY is (k, n, m).
void StageBuilder::gemm_bwd(std::int64_t m, std::int64_t n, std::int64_t k, std::string_view dgrad,
                            std::string_view wgrad, std::int64_t batch) {
  kernel(gemm(m, k, n, x_.gemm_dtype, batch), dgrad);
  kernel(wgrad_gemm(k, n, m, x_.gemm_dtype, batch), wgrad);
}

void StageBuilder::bmm_bwd(std::int64_t m, std::int64_t n, std::int64_t k, std::string_view dgrad,
                           std::string_view wgrad, std::int64_t batch) {
  kernel(gemm(m, k, n, x_.gemm_dtype, batch), dgrad);
  kernel(gemm(k, n, m, x_.gemm_dtype, batch), wgrad);
}

int StageBuilder::collective(CollectiveKind kind, std::uint16_t stream, int slot,
                             std::int64_t bytes, std::string_view name, DType dtype) {
  return b_.collective(stream, slot, kind, Bytes{bytes}, dtype, 0, name);
}

void StageBuilder::p2p(OpKind kind, std::uint16_t stream, int slot, std::int64_t bytes,
                       std::int32_t tag, std::string_view name, std::uint32_t group,
                       Transport transport) {
  PRISM_CHECK(kind == OpKind::kSend || kind == OpKind::kRecv, "p2p of a non-transfer");
  const int i = kind == OpKind::kSend ? b_.send(stream, slot, Bytes{bytes}, tag, name)
                                      : b_.recv(stream, slot, Bytes{bytes}, tag, name);
  b_.set_group(i, group);
  b_.set_transport(i, transport);
}

void StageBuilder::record(std::uint16_t stream, std::string_view event) {
  b_.record(stream, event, "event");
}

void StageBuilder::wait(std::uint16_t stream, std::string_view event) {
  b_.wait(stream, event, "event");
}

void StageBuilder::pass_on(const Ring& ring) {
  const std::uint32_t group = next_group_++;
  p2p(OpKind::kSend, ring.stream, ring.next, ring.bytes, ring.tag, ring.send, group,
      ring.transport);
  p2p(OpKind::kRecv, ring.stream, ring.prev, ring.bytes, ring.tag, ring.recv, group,
      ring.transport);
}

void StageBuilder::ring_exchange(const Ring& ring, int steps,
                                 const std::function<void(int)>& step) {
  record(kCompute, ring.begin);
  wait(ring.stream, ring.begin);
  for (int i = 0; i < steps; ++i) {
    const bool more = i + 1 < steps;
    if (more) {
      pass_on(ring);
      record(ring.stream, ring.arrived);
    }
    step(i);
    if (more) wait(kCompute, ring.arrived);
  }
}

// The hidden state a layer of `chunk` hands on: the next layer's input (kept
// for its backward or, inside a recompute group, dropped after its forward),
// or for the last layer what leaves the chunk.
static bool keeps_input(const std::vector<ActivationTensor>& kept) {
  return std::any_of(kept.begin(), kept.end(),
                     [](const ActivationTensor& t) { return t.name == "norm1_input"; });
}

static std::string_view output_name(int layer, int layers, bool has_output_peer,
                                    bool next_keeps_it) {
  if (layer + 1 < layers) return next_keeps_it ? "act.norm1_input" : "norm1_input";
  return has_output_peer ? "pp_send_activation" : "act.final_norm_input";
}

// Received and sent tensors: torch's c10d records every point-to-point
// tensor on its NCCL stream, so a freed buffer returns to the allocator only
// when that stream is past the transfer. A sent output is freed as soon as
// the send is issued (Megatron's deallocate_output_tensor with
// deallocate_pipeline_outputs, the default; without it the schedule holds it
// until the micro-batch's backward); the input gradient simply goes out of
// scope; a received tensor is freed when it has been consumed.
void StageBuilder::forward(int chunk, int mb) {
  b_.marker(kCompute, MarkerKind::kMicrobatch, mb, "microbatch");
  const std::int64_t p2p_bytes = kBf16 * x_.Tsp * x_.h;
  if (has_input_peer(chunk)) {
    // The first layer's input (its "norm1_input"), kept until its backward.
    hidden_ = {alloc(p2p_bytes, "pp_recv_activation"), stream_bit(kRecvFwd)};
    p2p(OpKind::kRecv, kRecvFwd, slots_.pp_prev, p2p_bytes, kTagActivation, "pp_recv_activation");
    record(kRecvFwd, "activation_received");
    wait(kCompute, "activation_received");
  }
  if (first_chunk_here(chunk)) {
    layer_.clear();
    embedding(false);
    saved_[{chunk, mb, kEmbeddingItem}] = std::move(layer_);
  }
  const int layers = chunk_layers_[chunk];
  for (int l = 0; l < layers; ++l) {
    if (mb == 0 && job_.training.use_distributed_optimizer && job_.training.overlap_param_gather &&
        slots_.dp_cp >= 0) {
      const int bucket = bucket_of_layer_[chunk][l];
      if (bucket >= 0 && !gathered_[bucket]) {
        wait(kCompute, fmt::format("params_gathered_{}", bucket));
        gathered_[bucket] = true;
      }
    }
    // FP8: TE casts (and transposes) each linear's weight once per
    // iteration, at the first micro-batch, and caches it; FP8 primary weights
    // (fp8_param_gather) need only the transpose.
    if (mb == 0 && x_.fp8)
      mem("fp8_weight_cast", (job_.training.fp8_param_gather ? 2 : x_.fp8_cast_bytes) * lp_.linear);
    layer_.clear();
    layer_["norm1_input"] = hidden_;
    pass_ = Pass::kForward;
    keeping_ = &kept_by(chunk, l);
    const bool next_keeps_input = l + 1 < layers && keeps_input(kept_by(chunk, l + 1));
    layer_forward(output_name(l, layers, has_output_peer(chunk), next_keeps_input));
    saved_[{chunk, mb, l}] = std::move(layer_);
  }
  keeping_ = &kept_;
  if (last_chunk_here(chunk)) {
    layer_.clear();
    output_layer(false);
    saved_[{chunk, mb, kOutputItem}] = std::move(layer_);
  }
  amax_reduction(chunk, false);
  // forward_step has returned: 1F1B's `output_tensor` now names this output.
  free_if_held(&stale_output_);
  if (has_output_peer(chunk)) {
    record(kCompute, "forward_done");
    wait(kSendFwd, "forward_done");
    p2p(OpKind::kSend, kSendFwd, slots_.pp_next, p2p_bytes, kTagActivation, "pp_send_activation");
    const Held sent{hidden_.op, hidden_.record_streams | stream_bit(kSendFwd)};
    if (job_.training.deallocate_pipeline_outputs) {
      free(sent);
    } else {
      sent_outputs_[{chunk, mb}] = sent;
    }
  }
  hidden_ = {};
}

// Without deallocate_pipeline_outputs a sent output lives until its
// micro-batch's backward drops the last reference. The interleaved schedule
// pops it inside backward_step_helper, so it goes when that helper returns,
// except the last forward's, which the schedule's loop variable
// `output_tensor` keeps until the schedule returns (after
// finalize_model_grads). The non-interleaved one pops it into its loop's
// `output_tensor`, which keeps it until the next forward_step returns, the
// next cooldown pop, or the schedule's return.
void StageBuilder::free_if_held(Held* h) {
  if (h->op < 0) return;
  free(*h);
  *h = {};
}

void StageBuilder::backward(int chunk, int mb) {
  const std::int64_t p2p_bytes = kBf16 * x_.Tsp * x_.h;
  free_if_held(&stale_output_);  // the cooldown's pop rebinds `output_tensor`
  if (has_output_peer(chunk)) {
    grad_ = {alloc(p2p_bytes, "pp_recv_grad"), stream_bit(kRecvBwd)};
    p2p(OpKind::kRecv, kRecvBwd, slots_.pp_next, p2p_bytes, kTagGrad, "pp_recv_grad");
    record(kRecvBwd, "grad_received");
    wait(kCompute, "grad_received");
  }
  const bool last_mb = mb == job_.num_microbatches() - 1;
  int item = 0;
  auto done_item = [&] {
    if (last_mb) bucket_ready(chunk, item);
    ++item;
  };
  if (last_chunk_here(chunk)) {
    layer_ = take_saved(chunk, mb, kOutputItem);
    output_layer(true);
    done_item();
  }
  for (int l = chunk_layers_[chunk] - 1; l >= 0; --l) {
    const LayerRecompute r = layer_recompute(job_.training, l, chunk_layers_[chunk]);
    if (r.recomputed && l == r.last) recompute_group(chunk, mb, r.first, r.last);
    if (r.recomputed) {
      layer_ = std::move(regrown_.at(l));
      regrown_.erase(l);
    } else {
      layer_ = take_saved(chunk, mb, l);
    }
    keeping_ = &kept_by(chunk, l);
    layer_backward(l == 0 && has_input_peer(chunk) ? "pp_send_grad" : "grad.norm1_input");
    pass_ = Pass::kForward;
    done_item();
  }
  keeping_ = &kept_;
  if (first_chunk_here(chunk)) {
    layer_ = take_saved(chunk, mb, kEmbeddingItem);
    embedding(true);
    done_item();
  }
  amax_reduction(chunk, true);
  const auto sent = sent_outputs_.find({chunk, mb});
  if (sent != sent_outputs_.end()) {
    if (v_ == 1) {
      stale_output_ = sent->second;
    } else if (sent->first == last_forward_) {
      last_output_ = sent->second;
    } else {
      free(sent->second);
    }
    sent_outputs_.erase(sent);
  }
  if (has_input_peer(chunk)) {
    record(kCompute, "backward_done");
    wait(kSendBwd, "backward_done");
    p2p(OpKind::kSend, kSendBwd, slots_.pp_prev, p2p_bytes, kTagGrad, "pp_send_grad");
    free(grad_.op, grad_.record_streams | stream_bit(kSendBwd));
  }
  grad_ = {};
}

// One fp32 amax per FP8 tensor of the chunk's linears (qkv, proj, fc1, fc2):
// input and weight after the forward, the output gradient after the
// backward, all-reduced over the amax reduction group (Megatron-Core's
// get_amax_reduction_group: the stage's tp x cp x dp ranks). Then Transformer
// Engine's scale update (tex.fused_amax_and_scale_update_after_reduction,
// one multi-tensor kernel): each tensor's amax history rolled by one (read
// and written, fp32) and its new scale and inverse written.
void StageBuilder::amax_reduction(int chunk, bool backward) {
  if (!x_.fp8_amax_reduction) return;
  const std::int64_t tensors = (backward ? 1 : 2) * 4 * std::int64_t{chunk_layers_[chunk]};
  if (slots_.amax >= 0)
    collective(CollectiveKind::kAllReduce, kCompute, slots_.amax, kFp32 * tensors,
               "fp8_amax_reduce", DType::kFloat32);
  mem("fp8_scale_update", tensors * kFp32 * (2 * x_.fp8_amax_history + 2));
}

// Megatron-Core's checkpointed forward, re-run under autograd: the group's
// first layer starts from its kept input, each later one from the re-made
// output before it, which becomes that layer's input (released by its
// backward); the last layer's output is freed after the group's first
// backward.
void StageBuilder::recompute_group(int chunk, int mb, int first, int last) {
  pass_ = Pass::kRecompute;
  int input = -1;
  for (int l = first; l <= last; ++l) {
    layer_ = take_saved(chunk, mb, l);
    if (l > first) layer_["norm1_input"] = {input, 0};
    layer_forward("recomputed.layer_output");
    if (l < last) {
      input = recomputed_output_;
      recomputed_output_ = -1;
    }
    regrown_[l] = std::move(layer_);
  }
}

void StageBuilder::finish_iteration() {
  const TrainingSpec& tr = job_.training;
  if (!tr.overlap_grad_reduce) {
    for (int c = 0; c < v_; ++c) {
      for (const Bucket& bucket : buckets_[c]) {
        if (bucket_slot(bucket) >= 0) alloc_grad_shard(bucket);
      }
    }
    record(kCompute, "grads_ready");
    wait(kDp, "grads_ready");
    for (int c = 0; c < v_; ++c) {
      for (const Bucket& bucket : buckets_[c]) {
        if (bucket_slot(bucket) >= 0) reduce_bucket(bucket);
      }
    }
  }
  record(kDp, "grads_synced");
  wait(kCompute, "grads_synced");
  // Tied embeddings: the first and last stages sum their copies' gradients.
  if (slots_.embd >= 0 && (stage_ == 0 || stage_ == p_ - 1)) {
    collective(CollectiveKind::kAllReduce, kCompute, slots_.embd, x_.grad_bytes * x_.vocab * x_.h,
               "embd_grad_all_reduce", grad_dtype());
  }
  // The schedule function returns.
  free_if_held(&stale_output_);
  free_if_held(&last_output_);
  const bool apex = tr.optimizer_impl == OptimizerImpl::kApexDistributedFusedAdam;
  // Megatron-Core with bf16 main gradients: the optimizer copies its shard
  // to fp32 (DistributedOptimizer._copy_model_grads_to_main_grads: .float()),
  // held until the next iteration's zero_grad. Apex's fused kernel reads the
  // grad_sync_dtype shard as it is.
  const int main_grads =
      apex || x_.grad_bytes == kFp32 ? -1 : alloc(kFp32 * optimizer_params_, "main_grad_fp32");
  // Apex without contiguous_param_buffer (NeMo leaves it off): step() gives
  // each bucket a params_shard (torch.empty, param_sync_dtype: bf16, or uint8
  // with FP8 params) for the kernel's output, held until the bucket's
  // all-gather has copied it into the parameters; one allocation per bucket.
  std::vector<int> param_shards;
  if (apex) {
    for (const auto& chunk : buckets_)
      for (const Bucket& bucket : chunk)
        param_shards.push_back(
            alloc(bucket.params / bucket_shards(bucket) * (tr.fp8_param_gather ? 1 : kBf16),
                  "param_sync_shard"));
  }
  kernel(memory_bound("optimizer", optimizer_params_ * optimizer_bytes_per_param(job_)),
         "optimizer");
  if (!tr.overlap_param_gather) param_gather(false);
  if (main_grads >= 0) free(main_grads);
  for (const int shard : param_shards) free(shard);
  for (const int shard : grad_shards_) free(shard);
  grad_shards_.clear();
}

Role StageBuilder::build(RoleFootprint* footprint) {
  // validate_job() leaves every chunk at least one layer, which the hidden
  // state's chain of allocations relies on.
  PRISM_CHECK(*std::min_element(chunk_layers_.begin(), chunk_layers_.end()) > 0,
              "a model chunk without layers");
  plan_buckets();
  const TrainingSpec& tr = job_.training;
  std::int64_t params = 0, opt = 0;
  for (const auto& chunk : buckets_) {
    for (const Bucket& b : chunk) {
      params += b.params;
      opt += b.params / bucket_shards(b);
    }
  }
  optimizer_params_ = opt;
  // Weights in bf16, but the TE linear layers' in FP8 with fp8_param_gather;
  // under fp8, TE's cached FP8 copies of those besides (linear_weight_bytes).
  const int stage_layers = job_.layers_on_stage(stage_);
  const std::int64_t linear_params = std::int64_t{stage_layers} * lp_.linear;
  const std::int64_t primary =
      params * kBf16 - (tr.fp8_param_gather ? (kBf16 - 1) * linear_params : 0);
  const std::int64_t fp8_cache = linear_weight_bytes(job_, linear_params) -
                                 (tr.fp8_param_gather ? linear_params : kBf16 * linear_params);
  const std::int64_t weights = primary + fp8_cache;
  footprint->parameters = params;
  footprint->optimizer_params = opt;
  footprint->num_layers = stage_layers;
  // Per layer on average: under full recompute's block method the stage's
  // layers keep different amounts.
  std::int64_t kept_bytes = 0;
  for (int c = 0; c < v_; ++c) {
    for (int l = 0; l < chunk_layers_[c]; ++l)
      for (const ActivationTensor& t : kept_by(c, l)) kept_bytes += t.bytes;
  }
  footprint->activation_bytes_per_layer = Bytes{kept_bytes / stage_layers};
  const std::int64_t state = opt * optimizer_state_bytes_per_param(job_);
  footprint->model_state_bytes = Bytes{weights + params * x_.grad_bytes + state};

  alloc(primary, "weights");
  if (x_.ub) alloc(userbuffer_bytes(x_), "tp_comm_userbuffers");
  if (fp8_cache > 0) alloc(fp8_cache, "fp8_weight_cache");
  alloc(params * x_.grad_bytes, "grad_buffer");
  alloc(state, "optimizer_state");
  b_.marker(kCompute, MarkerKind::kIteration, 0, "iteration");
  mem("zero_grad", params * x_.grad_bytes);
  if (tr.overlap_param_gather) param_gather(true);

  const int m = job_.num_microbatches();
  const std::vector<Step> steps = pipeline_schedule(p_, v_, m, stage_);
  for (const Step& step : steps)
    if (step.forward) last_forward_ = {step.chunk, step.microbatch};
  for (const Step& step : steps) {
    if (step.forward) {
      forward(step.chunk, step.microbatch);
    } else {
      backward(step.chunk, step.microbatch);
    }
  }
  PRISM_CHECK(saved_.empty() && sent_outputs_.empty(), "a forward's tensors were never freed");
  drain_deferred_wgrad();
  finish_iteration();
  return std::move(b_).build();
}

}  // namespace megatron

Result<BuiltJob> build_megatron(const JobSpec& job, const KernelModel& model) {
  PRISM_RETURN_IF_ERROR(validate_job(job));
  // The expectation is integrated once per build (about 1 ms).
  const double slowdown = slowest_gpu_slowdown(model.gpu(), job.num_gpus);
  const KernelModel kernels(slowed_by(model.gpu(), slowdown), model.db());
  BuiltJob out;
  out.slowest_gpu_slowdown = slowdown;
  ExecutionGraph& g = out.graph;
  g.name = job.name;
  g.cluster = format_cluster_yaml(job.cluster);
  const int world = job.num_gpus;
  const int gpn = std::min(world, job.cluster.gpus_per_node);
  g.layout =
      Layout(world, {{"tp", job.tp()}, {"cp", job.cp()}, {"dp", job.dp()}, {"pp", job.pp()}}, gpn);
  megatron::SlotIds s;
  auto add = [&](CommSlot slot) {
    g.slots.push_back(std::move(slot));
    return static_cast<int>(g.slots.size() - 1);
  };
  if (job.tp() > 1) s.tp = add(CommSlot::grid_group("tp", {0}));
  const megatron::Dims x = megatron::make_dims(job);
  if (x.ub) {
    s.tp_next = add(CommSlot::grid_peer("tp_next", 0, 1, true));
    s.tp_prev = add(CommSlot::grid_peer("tp_prev", 0, -1, true));
  }
  if (job.cp() > 1) {
    s.cp = add(CommSlot::grid_group("cp", {1}));
    s.cp_next = add(CommSlot::grid_peer("cp_next", 1, 1, true));
    s.cp_prev = add(CommSlot::grid_peer("cp_prev", 1, -1, true));
  }
  if (job.dp() * job.cp() > 1) s.dp_cp = add(CommSlot::grid_group("dp_cp", {1, 2}));
  if (x.fp8_amax_reduction && job.tp() * job.dp() * job.cp() > 1)
    s.amax = add(CommSlot::grid_group("amax", {0, 1, 2}));
  if (job.pp() > 1) {
    const bool wrap = job.vpp() > 1;
    s.pp_next = add(CommSlot::grid_peer("pp_next", 3, 1, wrap));
    s.pp_prev = add(CommSlot::grid_peer("pp_prev", 3, -1, wrap));
  }
  if (job.model.is_moe()) {
    if (job.ep() > 1) s.ep = add(CommSlot::explicit_group("ep", megatron::expert_groups(job, 1)));
    if (job.etp() > 1)
      s.etp = add(CommSlot::explicit_group("etp", megatron::expert_groups(job, 0)));
    if (job.expert_dp() > 1)
      s.edp = add(CommSlot::explicit_group("edp", megatron::expert_groups(job, 2)));
  }
  if (job.pp() > 1 && !job.model.untie_embeddings_and_output_weights) {
    std::vector<std::vector<Rank>> groups;
    const int stage_size = world / job.pp();
    for (int i = 0; i < stage_size; ++i) groups.push_back({i, (job.pp() - 1) * stage_size + i});
    s.embd = add(CommSlot::explicit_group("embd", std::move(groups)));
  }

  std::map<std::string, KernelUse> uses;
  g.roles.reserve(job.pp());
  out.roles.resize(job.pp());
  for (int stage = 0; stage < job.pp(); ++stage) {
    g.roles.push_back(
        megatron::StageBuilder(job, kernels, s, stage, &uses).build(&out.roles[stage]));
  }
  g.role_of_rank.resize(world);
  for (Rank r = 0; r < world; ++r) g.role_of_rank[r] = g.layout.coord(r, 3);
  PRISM_RETURN_IF_ERROR(finalize_graph(g).with_context("building " + job.name));
  PRISM_RETURN_IF_ERROR(validate_graph(g).with_context("building " + job.name));
  for (auto& [sig, use] : uses) out.kernels.push_back(std::move(use));
  return out;
}

}  // namespace prism
