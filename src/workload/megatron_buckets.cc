// Megatron's distributed data parallelism on the stage: the gradient
// buffer's buckets (which parameters each holds, when each is ready in
// backward), their reduction over the data-parallel group (all-reduce, or
// reduce-scatter into a shard with the distributed optimizer, Apex's shard
// buffers included), and the parameter all-gathers before the next forward.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "workload/megatron_stage.h"

namespace prism::megatron {

// Megatron's DDP buckets: parameters in backward order, a bucket closing once
// it holds at least bucket_size parameters; expert parameters in their own
// buckets (reduced over the expert data-parallel group).
void StageBuilder::plan_buckets() {
  const std::int64_t limit = job_.bucket_params();
  const std::int64_t embedding_params = x_.vocab * x_.h;
  buckets_.assign(v_, {});
  closes_after_.assign(v_, {});
  bucket_of_layer_.assign(v_, {});
  for (int c = 0; c < v_; ++c) {
    const int layers = chunk_layers_[c];
    bucket_of_layer_[c].assign(layers, -1);
    std::vector<std::int64_t> dense_items, expert_items, dense_linear;
    if (last_chunk_here(c)) {
      // Output layer (its own weight; with tied embeddings, a copy when the
      // embedding lives on another stage) and the final norm.
      const bool own_weight = job_.model.untie_embeddings_and_output_weights || p_ > 1;
      const std::int64_t norm =
          (job_.model.normalization == Normalization::kLayerNorm ? 2 : 1) * x_.h;
      dense_items.push_back((own_weight ? embedding_params : 0) + norm);
      expert_items.push_back(0);
      dense_linear.push_back(0);
    }
    for (int l = 0; l < layers; ++l) {
      dense_items.push_back(lp_.dense);
      expert_items.push_back(lp_.expert);
      dense_linear.push_back(lp_.linear - lp_.expert);
    }
    if (first_chunk_here(c)) {
      dense_items.push_back(embedding_params + (x_.bias ? job_.training.seq_length * x_.h : 0));
      expert_items.push_back(0);
      dense_linear.push_back(0);
    }
    closes_after_[c].assign(dense_items.size(), {});
    const bool has_output = last_chunk_here(c);
    for (const bool expert : {false, true}) {
      const std::vector<std::int64_t>& items = expert ? expert_items : dense_items;
      std::int64_t open = 0, open_linear = 0;
      for (std::size_t i = 0; i < items.size(); ++i) {
        open += items[i];
        open_linear += expert ? items[i] : dense_linear[i];
        const int layer = static_cast<int>(i) - (has_output ? 1 : 0);
        const int bucket_id = num_buckets_ + static_cast<int>(buckets_[c].size());
        if (!expert && layer >= 0 && layer < layers)
          bucket_of_layer_[c][layers - 1 - layer] = bucket_id;
        if (open > 0 && (open >= limit || i + 1 == items.size())) {
          buckets_[c].push_back({open, expert, open_linear});
          closes_after_[c][i].push_back(static_cast<int>(buckets_[c].size()) - 1);
          open = 0;
          open_linear = 0;
        }
      }
    }
    num_buckets_ += static_cast<int>(buckets_[c].size());
  }
  gathered_.assign(num_buckets_, false);
}

static int bucket_base(const std::vector<std::vector<Bucket>>& buckets, int chunk) {
  int base = 0;
  for (int c = 0; c < chunk; ++c) base += static_cast<int>(buckets[c].size());
  return base;
}

// Backward item `item` of `chunk` is done in the last micro-batch: reduce the
// buckets it completes, on the dp stream (overlap_grad_reduce), or leave them
// for after the backward.
void StageBuilder::bucket_ready(int chunk, int item) {
  if (!job_.training.overlap_grad_reduce) return;
  for (const int b : closes_after_[chunk][item]) {
    // Deferred output-layer weight gradients: that bucket waits for the drain.
    if (last_chunk_here(chunk) && b == kOutputBucket && job_.training.defer_embedding_wgrad_compute)
      continue;
    const Bucket& bucket = buckets_[chunk][b];
    if (bucket_slot(bucket) < 0) continue;
    alloc_grad_shard(bucket);
    record(kCompute, "grads_ready");
    wait(kDp, "grads_ready");
    reduce_bucket(bucket);
  }
}

// The data-parallel group a bucket is reduced over, or -1 when it has one rank.
int StageBuilder::bucket_slot(const Bucket& bucket) const {
  return bucket.expert ? slots_.edp : slots_.dp_cp;
}

// The data-parallel ranks a bucket's optimizer state is sharded over (1
// without the distributed optimizer).
int StageBuilder::bucket_shards(const Bucket& bucket) const {
  if (!job_.training.use_distributed_optimizer) return 1;
  return bucket.expert ? job_.expert_dp() : job_.dp() * job_.cp();
}

// Apex's DistributedFusedAdam reduce-scatters a bucket into a fresh shard
// buffer of the grad_sync_dtype (_start_bucket_grad_sync: sync_grads_shard =
// torch.empty([bucket_size // distributed_size]), on the main stream before
// the communication stream waits for it), which becomes the bucket's
// grads_shard for the step (_finish_bucket_grad_sync) and is dropped at the
// next zero_grad: held to the end of the iteration. Megatron-Core
// reduce-scatters in place in its grad buffer: nothing.
void StageBuilder::alloc_grad_shard(const Bucket& bucket) {
  if (job_.training.optimizer_impl != OptimizerImpl::kApexDistributedFusedAdam) return;
  grad_shards_.push_back(
      alloc(x_.grad_bytes * bucket.params / bucket_shards(bucket), "grad_shard"));
}

// A bucket's gradients, in the grad buffer's dtype (fp32 with
// grad_reduce_in_fp32, else bf16): reduce-scattered for the distributed
// optimizer, all-reduced otherwise, on the dp stream.
void StageBuilder::reduce_bucket(const Bucket& bucket) {
  collective(job_.training.use_distributed_optimizer ? CollectiveKind::kReduceScatter
                                                     : CollectiveKind::kAllReduce,
             kDp, bucket_slot(bucket), x_.grad_bytes * bucket.params, "dp_grad_reduce",
             grad_dtype());
}

// The distributed optimizer's all-gather of updated parameters, bucket by
// bucket: under the next forward (overlapped: issued at the iteration's
// start, each layer waits for its bucket), or after the optimizer step.
// bf16, but with fp8_param_gather the linear weights travel as FP8 (their
// DDP param buffer is uint8), 1 byte each.
void StageBuilder::param_gather(bool overlapped) {
  if (!job_.training.use_distributed_optimizer) return;
  const std::uint16_t stream = overlapped ? kDp : kCompute;
  for (int c = 0; c < v_; ++c) {
    const int base = bucket_base(buckets_, c);
    // Dense buckets in forward order (the last one, nearest the input, first),
    // then the experts'.
    std::vector<int> order;
    for (const bool expert : {false, true})
      for (int b = static_cast<int>(buckets_[c].size()) - 1; b >= 0; --b)
        if (buckets_[c][b].expert == expert) order.push_back(b);
    for (const int b : order) {
      const Bucket& bucket = buckets_[c][b];
      const int slot = bucket_slot(bucket);
      if (slot < 0) continue;
      const std::int64_t fp8 = job_.training.fp8_param_gather ? bucket.linear : 0;
      collective(CollectiveKind::kAllGather, stream, slot, kBf16 * bucket.params - fp8,
                 "dp_param_gather");
      if (overlapped && !bucket.expert) record(kDp, fmt::format("params_gathered_{}", base + b));
    }
  }
}

}  // namespace prism::megatron
