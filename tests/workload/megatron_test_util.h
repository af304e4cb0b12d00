// Helpers shared by the Megatron builder tests: job specs from YAML text,
// graphs built with the H100 kernel model, and check_random_job, the
// property every built job must have (it replays to completion, folded and
// unfolded alike, and balances its memory).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "compute/compute_model.h"
#include "compute/gpu_spec.h"
#include "compute/kernel_model.h"
#include "mem/memory_model.h"
#include "net/flow_network.h"
#include "replay/replay.h"
#include "workload/job_yaml.h"
#include "workload/megatron.h"
#include "workload/megatron_shapes.h"
#include "workload/model_stats.h"

namespace prism::testing {

inline JobSpec parse(const std::string& yaml) {
  Result<JobSpec> j = parse_job_yaml(yaml, "<test>");
  EXPECT_TRUE(j.is_ok()) << j.status().message() << "\n" << yaml;
  return j.is_ok() ? std::move(j).value() : JobSpec{};
}

inline const KernelModel& h100() {
  static const KernelModel km(gpu_spec("H100-SXM5-80GB").value(), nullptr);
  return km;
}

inline BuiltJob build(const JobSpec& job) {
  Result<BuiltJob> b = build_megatron(job, h100());
  EXPECT_TRUE(b.is_ok()) << b.status().message();
  return b.is_ok() ? std::move(b).value() : BuiltJob{};
}

// Memory-bound kernels of the graph whose signature starts with `prefix`
// ("mem cp_"): signature -> uses over its roles.
inline std::map<std::string, std::int64_t> kernel_uses(const BuiltJob& b,
                                                       const std::string& prefix) {
  std::map<std::string, std::int64_t> out;
  for (const KernelUse& k : b.kernels)
    if (k.signature.rfind(prefix, 0) == 0) out[k.signature] += k.count;
  return out;
}

// The cluster section: `gpus` H100s of the dgx-h100 preset.
inline std::string cluster(int gpus) {
  return "cluster: {preset: dgx-h100, num_gpus: " + std::to_string(gpus) + "}\n";
}

// A small GPT-style model (GeLU, LayerNorm, tied embeddings, biases).
inline std::string gpt(int layers, int hidden, int heads, int vocab = 1000) {
  return "model: {num_layers: " + std::to_string(layers) +
         ", hidden_size: " + std::to_string(hidden) +
         ", num_attention_heads: " + std::to_string(heads) +
         ", vocab_size: " + std::to_string(vocab) + "}\n";
}

inline ReplayResult replay_on_cluster(const JobSpec& job, const ExecutionGraph& g, bool fold,
                                      MemoryModel* memory) {
  FlowNetwork network(job.cluster);
  const RooflineModel compute;
  ReplayOptions options;
  options.fold = fold;
  Result<ReplayResult> r = replay(g, options, ReplayModels{&network, &compute, memory});
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? std::move(r).value() : ReplayResult{};
}

// Allocations of the role that no free releases, by name.
inline std::multiset<std::string> unfreed(const Role& role) {
  std::vector<bool> freed(role.ops.size(), false);
  for (const Op& op : role.ops) {
    if (op.kind == OpKind::kFree) {
      EXPECT_FALSE(freed[op.ref]) << role.name << " frees op " << op.ref << " twice";
      freed[op.ref] = true;
      EXPECT_EQ(op.bytes, role.ops[op.ref].bytes) << role.name;
    }
  }
  std::multiset<std::string> out;
  for (std::size_t i = 0; i < role.ops.size(); ++i) {
    if (role.ops[i].kind == OpKind::kAlloc && !freed[i]) out.insert(role.names[role.ops[i].name]);
  }
  return out;
}

inline void check_random_job(const JobSpec& job, const std::string& yaml) {
  SCOPED_TRACE(yaml);
  Result<BuiltJob> built = build_megatron(job, h100());
  ASSERT_TRUE(built.is_ok()) << built.status().message();
  const BuiltJob& b = built.value();
  ASSERT_EQ(b.graph.roles.size(), static_cast<std::size_t>(job.pp()));
  // Persistent: the model state (with FP8's cached weight copies), and
  // tp_comm_overlap's userbuffers.
  const megatron::Dims x = megatron::make_dims(job);
  std::multiset<std::string> persistent{"weights", "grad_buffer", "optimizer_state"};
  if (x.ub) persistent.insert("tp_comm_userbuffers");
  if (x.fp8) persistent.insert("fp8_weight_cache");
  const std::int64_t userbuffers = megatron::userbuffer_bytes(x);
  for (const Role& role : b.graph.roles) EXPECT_EQ(unfreed(role), persistent) << role.name;

  AllocatorMemoryModel folded_mem(DeviceMemoryOptions{}), unfolded_mem(DeviceMemoryOptions{});
  const ReplayResult folded = replay_on_cluster(job, b.graph, true, &folded_mem);
  const ReplayResult unfolded = replay_on_cluster(job, b.graph, false, &unfolded_mem);
  ASSERT_EQ(folded.outcome, ReplayResult::Outcome::kCompleted)
      << (folded.blocked.empty() ? "" : folded.blocked.front().waiting_for);
  ASSERT_EQ(unfolded.outcome, ReplayResult::Outcome::kCompleted)
      << (unfolded.blocked.empty() ? "" : unfolded.blocked.front().waiting_for);
  EXPECT_GT(folded.iteration_time, SimTime::zero());
  EXPECT_EQ(folded.iteration_time, unfolded.iteration_time);
  EXPECT_EQ(folded.makespan, unfolded.makespan);
  ASSERT_EQ(folded.roles.size(), unfolded.roles.size());
  ASSERT_EQ(folded.roles.size(), b.roles.size());
  for (std::size_t r = 0; r < folded.roles.size(); ++r) {
    const RoleSummary& f = folded.roles[r];
    EXPECT_EQ(f.max.peak_allocated, unfolded.roles[r].max.peak_allocated) << f.name;
    EXPECT_EQ(f.mean.peak_allocated, unfolded.roles[r].mean.peak_allocated) << f.name;
    EXPECT_EQ(f.max.peak_reserved, unfolded.roles[r].max.peak_reserved) << f.name;
    EXPECT_EQ(f.max.fragmentation, unfolded.roles[r].max.fragmentation) << f.name;
    EXPECT_EQ(f.max.inactive_split_peak, unfolded.roles[r].max.inactive_split_peak) << f.name;
    EXPECT_LE(f.max.fragmentation, f.max.peak_reserved) << f.name;
    EXPECT_EQ(f.max.finish, unfolded.roles[r].max.finish) << f.name;
    // The persistent state plus at least one layer's activations.
    const RoleFootprint& fp = b.roles[r];
    EXPECT_GE(f.max.peak_allocated, fp.model_state_bytes + fp.activation_bytes_per_layer) << f.name;
  }
  // After the iteration only the persistent state is still allocated: three
  // blocks, each rounded up to 512 bytes and, as PyTorch's allocator does for
  // large blocks, not split when less than 1 MiB would remain.
  for (Rank r = 0; r < job.num_gpus; ++r) {
    const Bytes state = b.roles[b.graph.role_of_rank[r]].model_state_bytes + Bytes{userbuffers};
    const Bytes allocated = unfolded_mem.usage(r).allocated;
    EXPECT_GE(allocated, state) << "rank " << r;
    EXPECT_LT(allocated.count, state.count + 4 * ((1 << 20) + 512)) << "rank " << r;
  }
}

// One model replica's parameters (every stage, every TP rank) as built.
inline std::int64_t replica_parameters(const BuiltJob& b, int tp) {
  std::int64_t n = 0;
  for (const RoleFootprint& f : b.roles) n += tp * f.parameters;
  return n;
}

// The same from count_parameters(), with the differences written out:
//   - Megatron pads the vocabulary to a multiple of 128 tp (each of the
//     embedding and an untied output layer);
//   - TP-replicated parameters (norms, row-parallel biases, the router) are
//     held by each of the tp ranks;
//   - GPT-style models have learned position embeddings (seq_length x h),
//     which count_parameters() leaves out; replicated over TP;
//   - with tied embeddings and pp > 1 the last stage keeps its own copy of
//     the embedding as the output layer.
inline std::int64_t expected_replica_parameters(const JobSpec& job) {
  const ModelSpec& m = job.model;
  const std::int64_t h = m.hidden_size, t = job.tp(), L = m.num_layers;
  const bool bias =
      m.activation == Activation::kGelu && m.normalization == Normalization::kLayerNorm;
  const std::int64_t norm = m.normalization == Normalization::kLayerNorm ? 2 * h : h;
  const std::int64_t padding = (m.padded_vocab_size(job.tp()) - m.vocab_size) * h;
  std::int64_t n = count_parameters(m).total;
  n += padding * (m.untie_embeddings_and_output_weights ? 2 : 1);
  // Per layer: two norms, and the biases of the two row-parallel layers.
  std::int64_t replicated = L * (2 * norm + (bias ? 2 * h : 0)) + norm;
  if (m.is_moe()) replicated += L * h * m.num_moe_experts;  // router
  if (bias) {
    n += job.training.seq_length * h;  // position embeddings
    replicated += job.training.seq_length * h;
  }
  n += (t - 1) * replicated;
  if (job.pp() > 1 && !m.untie_embeddings_and_output_weights)
    n += std::int64_t{m.padded_vocab_size(job.tp())} * h;
  return n;
}

}  // namespace prism::testing
