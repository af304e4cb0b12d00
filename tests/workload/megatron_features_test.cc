// build_megatron()'s Megatron-Core features, each against the source: layer
// placement (get_num_layers_to_build), recomputation, TP communication
// overlap, RoPE and FP8 kernels, deferred embedding wgrad and
// deallocate_pipeline_outputs; each job also passes check_random_job.
#include "workload/megatron.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "graph/graph_json.h"
#include "workload/job_yaml.h"
#include "workload/megatron_shapes.h"
#include "workload/model_stats.h"

#include "megatron_test_util.h"

namespace prism {
namespace {

using testing::build;
using testing::check_random_job;
using testing::cluster;
using testing::expected_replica_parameters;
using testing::gpt;
using testing::h100;
using testing::parse;
using testing::replay_on_cluster;
using testing::replica_parameters;
using testing::unfreed;

// Layers placed as Megatron-Core's get_num_layers_to_build places them: the
// uneven split with interleaving, the embedding and loss counted as layers,
// layers per virtual stage. Each stage runs a qkv GEMM per layer and
// micro-batch, holds its layers' parameters (the replica adds up), and the
// graph replays, folds and balances its memory like any other.
TEST(MegatronBuild, PlacesLayersAsMegatronCoreDoes) {
  const std::string model =
      "model: {num_layers: 14, hidden_size: 512, num_attention_heads: 8, vocab_size: 5000}\n";
  const std::string training = "training: {seq_length: 512, global_batch_size: 4}\n";
  struct Case {
    std::string parallelism;
    std::vector<int> layers;  // per stage
  };
  const Case cases[] = {
      {"{pipeline_model_parallel_size: 4, virtual_pipeline_model_parallel_size: 2,\n"
       "  decoder_first_pipeline_num_layers: 2, decoder_last_pipeline_num_layers: 4}",
       {2, 4, 4, 4}},
      {"{pipeline_model_parallel_size: 4, virtual_pipeline_model_parallel_size: 2,\n"
       "  account_for_embedding_in_pipeline_split: true,\n"
       "  account_for_loss_in_pipeline_split: true}",
       {3, 4, 4, 3}},
      {"{pipeline_model_parallel_size: 3, account-for-embedding-in-pipeline-split: true}",
       {4, 5, 5}},
      {"{pipeline_model_parallel_size: 2, num_layers_per_virtual_pipeline_stage: 2,\n"
       "  account_for_loss_in_pipeline_split: true, account_for_embedding_in_pipeline_split: "
       "true}",
       {7, 7}},
  };
  for (const Case& c : cases) {
    const std::string yaml = model + training + "parallelism: " + c.parallelism + "\n" +
                             cluster(static_cast<int>(c.layers.size()));
    SCOPED_TRACE(yaml);
    const JobSpec job = parse(yaml);
    ASSERT_EQ(job.pp(), static_cast<int>(c.layers.size()));
    const BuiltJob b = build(job);
    for (int stage = 0; stage < job.pp(); ++stage) {
      EXPECT_EQ(job.layers_on_stage(stage), c.layers[stage]) << "stage " << stage;
      EXPECT_EQ(b.roles[stage].num_layers, c.layers[stage]) << "stage " << stage;
      const Role& role = b.graph.roles[stage];
      const auto qkv = std::count_if(role.ops.begin(), role.ops.end(), [&](const Op& op) {
        return op.kind == OpKind::kCompute && role.names[op.name] == "qkv_fwd";
      });
      EXPECT_EQ(qkv, c.layers[stage] * job.num_microbatches()) << "stage " << stage;
    }
    EXPECT_EQ(replica_parameters(b, 1), expected_replica_parameters(job));
    check_random_job(job, yaml);
  }
}

// Megatron-Core's _checkpointed_forward: uniform groups of n layers (the
// last one shorter), block's first n layers of a chunk.
TEST(MegatronRecompute, LayerGroups) {
  TrainingSpec t;
  EXPECT_FALSE(megatron::layer_recompute(t, 3, 8).recomputed);
  t.recompute = Recompute::kFull;  // uniform, 1 layer
  for (int l = 0; l < 8; ++l) {
    const megatron::LayerRecompute r = megatron::layer_recompute(t, l, 8);
    EXPECT_TRUE(r.recomputed);
    EXPECT_EQ(r.first, l);
    EXPECT_EQ(r.last, l);
  }
  t.recompute_method = RecomputeMethod::kUniform;
  t.recompute_num_layers = 3;
  const megatron::LayerRecompute mid = megatron::layer_recompute(t, 4, 8);
  EXPECT_EQ(mid.first, 3);
  EXPECT_EQ(mid.last, 5);
  const megatron::LayerRecompute tail = megatron::layer_recompute(t, 7, 8);
  EXPECT_EQ(tail.first, 6);
  EXPECT_EQ(tail.last, 7);
  t.recompute_method = RecomputeMethod::kBlock;
  EXPECT_TRUE(megatron::layer_recompute(t, 2, 8).recomputed);
  EXPECT_FALSE(megatron::layer_recompute(t, 3, 8).recomputed);
}

// Each recompute method builds a graph that replays, folds and balances its
// memory; recomputed layers re-run their forward once per micro-batch (a
// second qkv GEMM) and the kept bytes per layer fall between no recompute
// and full recompute of every layer.
TEST(MegatronRecompute, MethodsReplayAndKeepWhatTheyShould) {
  const std::string base =
      "model: {num_layers: 8, hidden_size: 512, num_attention_heads: 8, vocab_size: 5000}\n"
      "parallelism: {pipeline_model_parallel_size: 2, virtual_pipeline_model_parallel_size: 2}\n" +
      cluster(2);
  struct Case {
    std::string training;
    int recomputed_per_chunk;  // of the 2 layers in each chunk
  };
  const Case cases[] = {
      {"{recompute: none}", 0},
      {"{recompute: full}", 2},
      {"{recompute: full, recompute_method: uniform, recompute_num_layers: 2}", 2},
      {"{recompute: full, recompute_method: block, recompute_num_layers: 1}", 1},
      {"{recompute: full, recompute_method: block, recompute_num_layers: 4}", 2},
  };
  std::vector<std::int64_t> per_layer;
  for (const Case& c : cases) {
    const std::string yaml =
        base + "training: {seq_length: 512, global_batch_size: 4, " + c.training.substr(1) + "\n";
    SCOPED_TRACE(yaml);
    const JobSpec job = parse(yaml);
    const BuiltJob b = build(job);
    for (int stage = 0; stage < 2; ++stage) {
      const Role& role = b.graph.roles[stage];
      const auto qkv = std::count_if(role.ops.begin(), role.ops.end(), [&](const Op& op) {
        return op.kind == OpKind::kCompute && role.names[op.name] == "qkv_fwd";
      });
      EXPECT_EQ(qkv, (4 + 2 * c.recomputed_per_chunk) * job.num_microbatches()) << stage;
    }
    per_layer.push_back(b.roles[0].activation_bytes_per_layer.count);
    check_random_job(job, yaml);
  }
  const std::int64_t none = per_layer[0], full = per_layer[1];
  EXPECT_LT(full, none);
  EXPECT_EQ(per_layer[2], full / 2);           // one input per group of two
  EXPECT_EQ(per_layer[3], (none + full) / 2);  // one of the two layers of a chunk
  EXPECT_EQ(per_layer[4], full);               // block covering the whole chunk
}

// tp_comm_overlap: userbuffers' ring exchanges (t - 1 paired sends per
// overlapped all-gather: qkv and fc1 forward, proj and fc2 dgrad), the
// pipelined reduce-scatters (4 per proj and fc2 forward) and the bulk
// overlaps run on the "tp" stream; the iteration is faster than with every
// TP collective exposed and slower than with none; each switch turned off
// gives part of the gain back; the graph replays, folds and balances its
// memory, with the userbuffers held throughout.
TEST(MegatronTpOverlap, OverlapsOnTheTpStream) {
  const std::string base =
      "model: {num_layers: 4, hidden_size: 8192, num_attention_heads: 64, vocab_size: 5000}\n"
      "training: {seq_length: 4096, global_batch_size: 2}\n" +
      cluster(8);
  auto job_of = [&](const std::string& extra) {
    return parse(base +
                 "parallelism: {tensor_model_parallel_size: 4, sequence_parallel: true,\n"
                 "  pipeline_model_parallel_size: 2" +
                 extra + "}\n");
  };
  auto iteration = [](const JobSpec& job) {
    const BuiltJob b = build(job);
    AllocatorMemoryModel mem(DeviceMemoryOptions{});
    return replay_on_cluster(job, b.graph, true, &mem).iteration_time;
  };
  const JobSpec plain = job_of(""), overlap = job_of(", tp_comm_overlap: true");
  check_random_job(overlap, "tp_comm_overlap");
  const BuiltJob b = build(overlap);
  for (const Role& role : b.graph.roles) {
    // On the tp stream (the embedding's and output layer's TP collectives,
    // which TE does not overlap, stay on the compute stream).
    const auto named = [&](std::string_view name, OpKind kind) {
      return std::count_if(role.ops.begin(), role.ops.end(), [&](const Op& op) {
        return op.kind == kind && role.names[op.name] == name && role.streams[op.stream] == "tp";
      });
    };
    const int passes = 2 * 2;  // layers x micro-batches
    EXPECT_EQ(named("tp_ring_send", OpKind::kSend), 3 * 4 * passes) << role.name;
    EXPECT_EQ(named("tp_ring_recv", OpKind::kRecv), 3 * 4 * passes) << role.name;
    // Pipelined (4 + 4) and bulk (qkv, fc1) reduce-scatters, bulk all-gathers.
    EXPECT_EQ(named("tp_reduce_scatter", OpKind::kCollective), (8 + 2) * passes) << role.name;
    EXPECT_EQ(named("tp_all_gather", OpKind::kCollective), 2 * passes) << role.name;
  }
  JobSpec free_comm = plain;
  free_comm.cluster.nvlink_links = 72;  // the same GEMMs, TP collectives almost free
  free_comm.cluster.nvlink_link_GBps = 1e4;
  const SimTime exposed = iteration(plain), overlapped = iteration(overlap);
  EXPECT_LT(overlapped, exposed);
  EXPECT_GT(overlapped, iteration(free_comm));
  for (const char* off : {", tp_comm_overlap_ag: false", ", tp_comm_overlap_rs: false",
                          ", tp_comm_bulk_dgrad: false", ", tp_comm_bulk_wgrad: false"}) {
    const SimTime partial = iteration(job_of(std::string(", tp_comm_overlap: true") + off));
    EXPECT_GT(partial, overlapped) << off;
    EXPECT_LT(partial, exposed) << off;
  }
}

// Kernels Transformer Engine and Megatron-Core run beside the GEMMs: fused
// RoPE on rotary models (forward, and backward once per layer and
// micro-batch), FP8 casts of every linear's input and output gradient, one
// weight cast per layer and iteration, and delayed scaling's amax all-reduce
// after each chunk's forward and backward; none of them in bf16 or on a
// GPT-style model's learned positions.
TEST(MegatronKernels, RopeAndFp8Casts) {
  const std::string llama =
      "model: {num_layers: 4, hidden_size: 1024, num_attention_heads: 8, vocab_size: 5000,\n"
      "  activation: swiglu, normalization: RMSNorm}\n"
      "parallelism: {tensor_model_parallel_size: 2, pipeline_model_parallel_size: 2}\n" +
      cluster(8);
  auto count = [](const BuiltJob& b, std::string_view name) {
    std::int64_t n = 0;
    for (const Role& role : b.graph.roles)
      n += std::count_if(role.ops.begin(), role.ops.end(),
                         [&](const Op& op) { return role.names[op.name] == name; });
    return n;
  };
  const std::string batch = "training: {seq_length: 1024, global_batch_size: 6";  // 3 per rank
  const BuiltJob bf16 = build(parse(llama + batch + "}\n"));
  EXPECT_EQ(count(bf16, "rope_fwd"), 4 * 3);
  EXPECT_EQ(count(bf16, "rope_bwd"), 4 * 3);
  EXPECT_EQ(count(bf16, "fp8_cast_grad"), 0);
  EXPECT_EQ(count(build(parse(gpt(4, 1024, 8) + "parallelism: {pipeline_model_parallel_size: 2}\n" +
                              cluster(8))),
                  "rope_fwd"),
            0);
  const JobSpec fp8_job = parse(llama + batch + ", precision: fp8}\n");
  const BuiltJob fp8 = build(fp8_job);
  EXPECT_EQ(count(fp8, "fp8_cast_qkv_input"), 4 * 3);
  EXPECT_EQ(count(fp8, "fp8_cast_attn_out"), 4 * 3);
  EXPECT_EQ(count(fp8, "fp8_cast_fc1_input"), 4 * 3);
  EXPECT_EQ(count(fp8, "fp8_cast_fc2_input"), 4 * 3);
  EXPECT_EQ(count(fp8, "fp8_cast_grad"), 4 * 4 * 3);  // proj, qkv, fc2, fc1 output gradients
  EXPECT_EQ(count(fp8, "fp8_weight_cast"), 4);
  EXPECT_EQ(count(fp8, "fp8_amax_reduce"), 2 * 2 * 3);  // 2 stages, forward and backward
  // Current scaling reads each tensor once more for its amax and reduces no
  // history: slower casts, no amax all-reduce.
  const BuiltJob current =
      build(parse(llama + batch + ", precision: fp8, fp8_recipe: tensorwise}\n"));
  EXPECT_EQ(count(current, "fp8_amax_reduce"), 0);
  SimTime delayed_cast{}, current_cast{};
  for (const auto& [b, sum] : {std::pair{&fp8, &delayed_cast}, std::pair{&current, &current_cast}})
    for (const Op& op : b->graph.roles[0].ops)
      if (b->graph.roles[0].names[op.name] == "fp8_cast_qkv_input") *sum += op.duration;
  EXPECT_GT(current_cast, delayed_cast);
  check_random_job(fp8_job, "fp8");
}

// defer_embedding_wgrad_compute: the last stage runs each deferred
// micro-batch's logits_wgrad after its last backward (the pipeline flush's
// drain), holding the output layer's input and the logits gradient until
// then; wgrad_deferral_limit defers only the first micro-batches. The output
// layer's bucket is reduced once, after the drain; the iteration is no
// slower; the graph replays, folds and balances its memory.
TEST(MegatronDeferWgrad, DrainsAtTheFlushAndHoldsItsBuffers) {
  const int m = 4;
  const std::string base =
      "model: {num_layers: 4, hidden_size: 1024, num_attention_heads: 8, vocab_size: 32000}\n"
      "parallelism: {tensor_model_parallel_size: 2, sequence_parallel: true,\n"
      "  pipeline_model_parallel_size: 2}\n" +
      cluster(8);
  auto job_of = [&](const std::string& extra) {
    return parse(base +
                 "training: {seq_length: 1024, global_batch_size: 8,\n"
                 "  use_distributed_optimizer: true, overlap_grad_reduce: true" +
                 extra + "}\n");
  };
  // Positions of `name` in the last stage's ops.
  auto positions = [](const BuiltJob& b, std::string_view name) {
    const Role& role = b.graph.roles.back();
    std::vector<std::size_t> out;
    for (std::size_t i = 0; i < role.ops.size(); ++i)
      if (role.names[role.ops[i].name] == name) out.push_back(i);
    return out;
  };
  auto peak = [](const JobSpec& job, const BuiltJob& b) {
    AllocatorMemoryModel mem(DeviceMemoryOptions{});
    const ReplayResult r = replay_on_cluster(job, b.graph, true, &mem);
    return std::pair{r.iteration_time, r.roles.back().max.peak_allocated.count};
  };
  for (const std::string ce : {"",
                               ", cross_entropy_loss_fusion: true, "
                               "cross_entropy_fusion_impl: te"}) {
    SCOPED_TRACE(ce);
    const JobSpec base_job = job_of(ce);
    const BuiltJob bb = build(base_job);
    const auto [plain_time, plain_peak] = peak(base_job, bb);
    for (const int limit : {0, 2}) {
      SCOPED_TRACE(limit);
      const JobSpec job =
          job_of(ce + ", defer_embedding_wgrad_compute: true" +
                 (limit ? ", wgrad_deferral_limit: " + std::to_string(limit) : std::string()));
      const BuiltJob b = build(job);
      const int deferred = limit ? limit : m;
      const std::vector<std::size_t> wgrad = positions(b, "logits_wgrad");
      const std::vector<std::size_t> dgrad = positions(b, "logits_dgrad");
      ASSERT_EQ(wgrad.size(), static_cast<std::size_t>(m));
      ASSERT_EQ(dgrad.size(), static_cast<std::size_t>(m));
      // After the last backward (its gradient sent to the previous stage).
      const std::size_t last_backward = positions(b, "pp_send_grad").back();
      EXPECT_GT(last_backward, dgrad.back());
      const auto after = std::count_if(wgrad.begin(), wgrad.end(),
                                       [&](std::size_t i) { return i > last_backward; });
      EXPECT_EQ(after, deferred);
      // The first stage's ops are unchanged, the output layer's bucket
      // reduced once on the last.
      EXPECT_EQ(b.graph.roles.front().ops.size(), bb.graph.roles.front().ops.size());
      EXPECT_EQ(positions(b, "dp_grad_reduce").size(), positions(bb, "dp_grad_reduce").size());
      EXPECT_GT(positions(b, "dp_grad_reduce").back(), wgrad.back());
      const auto [time, peak_bytes] = peak(job, b);
      EXPECT_LE(time, plain_time);
      // Held per deferred micro-batch: the sequence-sharded input and the
      // bf16 logits gradient [T, V / t]. At the peak (the last micro-batch's
      // output layer) every deferred one but that micro-batch's own is held
      // besides; with TE's cross entropy (its gradient written in place) the
      // peak moves to that micro-batch's forward, a few MiB above.
      const std::int64_t T = 1024, held = 2 * T / 2 * 1024 + 2 * T * 32000 / 2;
      const std::int64_t expected = (deferred == m ? m - 1 : deferred) * held;
      EXPECT_GE(peak_bytes - plain_peak, expected);
      EXPECT_LE(peak_bytes - plain_peak, expected + (4 << 20));
      check_random_job(job, "defer_embedding_wgrad_compute" + ce);
    }
  }
  // Interleaved: the drain follows the last chunk's backwards and the first
  // chunk's after them; without overlap_grad_reduce, every bucket after it.
  const JobSpec vpp = parse(
      gpt(4, 256, 8) +
      "training: {seq_length: 256, global_batch_size: 4, defer_embedding_wgrad_compute: true}\n"
      "parallelism: {pipeline_model_parallel_size: 2, virtual_pipeline_model_parallel_size: 2}\n" +
      cluster(4));
  const BuiltJob vb = build(vpp);
  const std::vector<std::size_t> wgrad = positions(vb, "logits_wgrad");
  ASSERT_EQ(wgrad.size(), 2u);
  // After the first chunk's last backward, which sends its gradient back.
  EXPECT_GT(wgrad.front(), positions(vb, "pp_send_grad").back());
  EXPECT_GT(positions(vb, "pp_send_grad").back(), positions(vb, "logits_dgrad").back());
  EXPECT_LT(wgrad.back(), positions(vb, "dp_grad_reduce").front());
  check_random_job(vpp, "defer_embedding_wgrad_compute vpp");
}

// deallocate_pipeline_outputs false (NeMo 1.0's ModelParallelConfig): a
// stage keeps each output it sent until that micro-batch's backward instead
// of freeing it at the send. The sent tensor here: s / t x b x h in bf16 =
// 1024 / 2 x 1 x 1024 x 2 B = 1 MiB. Stage 0 of a 1F1B pipeline of p = 2
// runs p - 0 - 1 = 1 warmup forward, so 2 micro-batches are in flight: at
// its first backward it holds both outputs, and two through the whole
// steady state (the one awaiting its backward, and the one backpropagated,
// which the schedule's `output_tensor` keeps through the next forward). So
// its peak grows by exactly 2 x 1 MiB = 2,097,152 bytes; the last stage
// sends nothing and is unchanged. Interleaved (v = 2, m = 4), stage 0 runs
// (p - 1) 2 + (v - 1) p = 4 warmup forwards, every one sending: at its first
// backward 5 outputs, 5 MiB more. Where the schedule's loop variables keep
// an output past its backward, one more is held (1F1B: through the next
// forward; interleaved: the last forward's, to the end).
TEST(MegatronDeallocateOutputs, SentOutputsLiveUntilTheirBackward) {
  const std::int64_t sent = 2 * 1024 / 2 * 1024;
  auto job_of = [&](bool deallocate, int vpp) {
    return parse(gpt(4, 1024, 8, 32000) +
                 "training: {seq_length: 1024, global_batch_size: " + (vpp > 1 ? "4" : "8") +
                 ", deallocate_pipeline_outputs: " + (deallocate ? "true" : "false") +
                 "}\n"
                 "parallelism: {tensor_model_parallel_size: 2, sequence_parallel: true,\n"
                 "  pipeline_model_parallel_size: 2, virtual_pipeline_model_parallel_size: " +
                 std::to_string(vpp) + "}\n" + cluster(4));
  };
  // Bytes allocated on stage 0 just before its n-th allocation named `name`
  // (n = -1: the last), frees counted at once.
  auto live_before = [](const BuiltJob& b, std::string_view name, int n) {
    const Role& role = b.graph.roles.front();
    std::vector<std::int64_t> at;
    std::int64_t live = 0;
    for (const Op& op : role.ops) {
      if (op.kind == OpKind::kAlloc && role.names[op.name] == name) at.push_back(live);
      if (op.kind == OpKind::kAlloc) live += op.bytes.count;
      if (op.kind == OpKind::kFree) live -= role.ops[op.ref].bytes.count;
    }
    const int i = n < 0 ? static_cast<int>(at.size()) - 1 : n;
    EXPECT_LT(i, static_cast<int>(at.size())) << name;
    return i >= 0 && i < static_cast<int>(at.size()) ? at[i] : std::int64_t{-1};
  };
  auto peaks = [](const JobSpec& job, const BuiltJob& b) {
    AllocatorMemoryModel mem(DeviceMemoryOptions{});
    const ReplayResult r = replay_on_cluster(job, b.graph, true, &mem);
    return std::pair{r.roles.front().max.peak_allocated.count,
                     r.roles.back().max.peak_allocated.count};
  };
  for (const int vpp : {1, 2}) {
    SCOPED_TRACE(vpp);
    const JobSpec freed_job = job_of(true, vpp), kept_job = job_of(false, vpp);
    const BuiltJob freed = build(freed_job), kept = build(kept_job);
    auto more = [&](std::string_view name, int n) {
      return live_before(kept, name, n) - live_before(freed, name, n);
    };
    // At the first backward (its gradient receive).
    const std::int64_t in_flight = vpp == 1 ? 2 : 5;
    EXPECT_EQ(more("pp_recv_grad", 0), in_flight * sent);
    if (vpp == 1) {
      // The third forward's output, after micro-batch 0's backward: its
      // output, still the loop's `output_tensor`, and micro-batch 1's.
      EXPECT_EQ(more("pp_send_activation", 2), 2 * sent);
    } else {
      // The last backward (chunk 0, micro-batch 3): its own output and the
      // last forward's (chunk 1, micro-batch 3), the loop's `output_tensor`.
      EXPECT_EQ(more("pp_recv_grad", -1), 2 * sent);
    }
    // Only the allocations' lifetimes move: the same ops, reordered frees.
    const Role& stage0 = kept.graph.roles.front();
    EXPECT_EQ(stage0.ops.size(), freed.graph.roles.front().ops.size());
    // The schedule's last forward output stays named by a loop variable
    // (interleaved: the steady state's; 1F1B: the backward's) until the
    // schedule returns: freed after the last backward has freed every
    // activation.
    std::size_t last_output_alloc = 0, last_output_free = 0, last_activation_free = 0;
    for (std::size_t i = 0; i < stage0.ops.size(); ++i) {
      const Op& op = stage0.ops[i];
      const std::string& name = stage0.names[op.name];
      if (name == "pp_send_activation" && op.kind == OpKind::kAlloc) last_output_alloc = i;
      if (name.rfind("act.", 0) == 0 && op.kind == OpKind::kFree) last_activation_free = i;
    }
    for (std::size_t i = 0; i < stage0.ops.size(); ++i)
      if (stage0.ops[i].kind == OpKind::kFree && stage0.ops[i].ref == last_output_alloc)
        last_output_free = i;
    EXPECT_GT(last_activation_free, 0u);
    EXPECT_GT(last_output_free, last_activation_free);
    if (vpp == 1) {
      const auto [freed_first, freed_last] = peaks(freed_job, freed);
      const auto [kept_first, kept_last] = peaks(kept_job, kept);
      EXPECT_EQ(kept_first - freed_first, in_flight * sent);
      EXPECT_EQ(kept_last, freed_last);
      EXPECT_EQ(kept.graph.roles.back().ops.size(), freed.graph.roles.back().ops.size());
    }
    check_random_job(kept_job, "deallocate_pipeline_outputs: false");
  }
  // The default is Megatron-LM's: freed at the send, the graph unchanged.
  const JobSpec plain = parse(gpt(4, 1024, 8, 32000) +
                              "training: {seq_length: 1024, global_batch_size: 8}\n"
                              "parallelism: {tensor_model_parallel_size: 2, sequence_parallel: "
                              "true,\n  pipeline_model_parallel_size: 2}\n" +
                              cluster(4));
  EXPECT_EQ(graph_to_json(build(plain).graph), graph_to_json(build(job_of(true, 1)).graph));
}

}  // namespace
}  // namespace prism
