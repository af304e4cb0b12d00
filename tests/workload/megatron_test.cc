// Tests of build_megatron() against Megatron-Core itself: its rank order and
// communicator groups (parallel_state's RankGenerator), its pipeline
// schedules (schedules.py), Korthikanti et al. 2022's activation memory, the
// parameter count of model_stats.h and Megatron-LM's FLOP formula. The
// property test over random jobs is megatron_property_test.cc; the
// Megatron-Core features, megatron_features_test.cc.
#include "workload/megatron.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "compute/compute_model.h"
#include "compute/gpu_spec.h"
#include "compute/kernel.h"
#include "compute/slowest_gpu.h"
#include "graph/graph_json.h"
#include "mem/memory_model.h"
#include "net/flow_network.h"
#include "replay/replay.h"
#include "workload/job_yaml.h"
#include "workload/megatron_shapes.h"
#include "workload/model_stats.h"

#include "megatron_test_util.h"

namespace prism {
namespace {

using testing::build;
using testing::cluster;
using testing::expected_replica_parameters;
using testing::gpt;
using testing::h100;
using testing::parse;
using testing::replica_parameters;

using Groups = std::vector<std::vector<Rank>>;

// Every group of slot `name`, each in communicator order, ordered by lowest
// member; checks that every member of a group resolves to that same group.
Groups groups_of(const ExecutionGraph& g, const std::string& name) {
  const int s = g.find_slot(name);
  EXPECT_GE(s, 0) << name;
  if (s < 0) return {};
  const SlotResolver res = g.resolver();
  std::map<Rank, std::vector<Rank>> by_first;
  for (Rank r = 0; r < g.world_size(); ++r) {
    if (res.group_id(s, r) == kNone) continue;
    std::vector<Rank> m;
    res.members(s, r, &m);
    EXPECT_EQ(res.group_size(s, r), static_cast<int>(m.size())) << name << " rank " << r;
    EXPECT_EQ(m[res.index_in_group(s, r)], r) << name << " rank " << r;
    const Rank lowest = *std::min_element(m.begin(), m.end());
    auto [it, inserted] = by_first.try_emplace(lowest, m);
    if (!inserted) {
      EXPECT_EQ(it->second, m) << name << " rank " << r;
    }
  }
  Groups out;
  for (auto& [first, m] : by_first) out.push_back(m);
  return out;
}

std::vector<Rank> peers_of(const ExecutionGraph& g, const std::string& name) {
  const int s = g.find_slot(name);
  EXPECT_GE(s, 0) << name;
  std::vector<Rank> out;
  if (s < 0) return out;
  for (Rank r = 0; r < g.world_size(); ++r) out.push_back(g.resolver().peer(s, r));
  return out;
}

// ---------------------------------------------------------------------------
// Layout and communicator groups.

// Megatron-Core's RankGenerator, order tp-cp-ep-dp-pp, on 16 GPUs with tp 2,
// cp 2, dp 2, pp 2: rank = tp + 2 cp + 4 dp + 8 pp.
TEST(MegatronLayout, DenseGroupsFollowMegatronRankOrder) {
  const JobSpec job =
      parse(gpt(4, 256, 8) +
            "training: {seq_length: 512}\n"
            "parallelism: {tensor_model_parallel_size: 2, sequence_parallel: true,\n"
            "  context_parallel_size: 2, pipeline_model_parallel_size: 2}\n" +
            cluster(16));
  ASSERT_EQ(job.dp(), 2);
  const BuiltJob b = build(job);
  const ExecutionGraph& g = b.graph;
  ASSERT_EQ(g.world_size(), 16);
  EXPECT_EQ(groups_of(g, "tp"),
            (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}));
  EXPECT_EQ(groups_of(g, "cp"),
            (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}}));
  // Megatron's data_parallel_group_with_cp: the dense gradients' group.
  EXPECT_EQ(groups_of(g, "dp_cp"),
            (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}}));
  // Tied embeddings: first and last stage of each pipeline.
  EXPECT_EQ(groups_of(g, "embd"),
            (Groups{{0, 8}, {1, 9}, {2, 10}, {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15}}));
  EXPECT_EQ(g.find_slot("dp"), -1);  // dense gradients reduce over dp_cp only
  EXPECT_EQ(g.find_slot("ep"), -1);
  // Pipeline peers: pp groups {0, 8}, {1, 9}, ...; no wrap without interleaving.
  std::vector<Rank> next(16, kNone), prev(16, kNone);
  for (Rank r = 0; r < 8; ++r) {
    next[r] = r + 8;
    prev[r + 8] = r;
  }
  EXPECT_EQ(peers_of(g, "pp_next"), next);
  EXPECT_EQ(peers_of(g, "pp_prev"), prev);
  // Ring attention: the next rank of the cp group, wrapping.
  EXPECT_EQ(peers_of(g, "cp_next"),
            (std::vector<Rank>{2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13}));
  EXPECT_EQ(peers_of(g, "cp_prev"), peers_of(g, "cp_next"));  // cp 2: the same peer
  // One role per stage; stage = rank / 8.
  ASSERT_EQ(g.roles.size(), 2u);
  for (Rank r = 0; r < 16; ++r) EXPECT_EQ(g.role_of_rank[r], r / 8) << r;
}

TEST(MegatronLayout, DataParallelGroupsWithoutContextParallelism) {
  const JobSpec job = parse(gpt(4, 256, 8) +
                            "parallelism: {tensor_model_parallel_size: 2,\n"
                            "  pipeline_model_parallel_size: 4}\n" +
                            cluster(16));
  const BuiltJob b = build(job);
  const ExecutionGraph& g = b.graph;
  EXPECT_EQ(groups_of(g, "dp_cp"),
            (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}}));
  EXPECT_EQ(groups_of(g, "embd"), (Groups{{0, 12}, {1, 13}, {2, 14}, {3, 15}}));
  EXPECT_EQ(g.find_slot("cp"), -1);
  EXPECT_EQ(g.find_slot("cp_next"), -1);
  std::vector<Rank> next(16, kNone);
  for (Rank r = 0; r < 12; ++r) next[r] = r + 4;
  EXPECT_EQ(peers_of(g, "pp_next"), next);
  for (Rank r = 0; r < 16; ++r) EXPECT_EQ(g.role_of_rank[r], r / 4) << r;
}

TEST(MegatronLayout, InterleavedPipelinePeersWrap) {
  const JobSpec job = parse(gpt(8, 256, 8) +
                            "training: {global_batch_size: 8}\n"
                            "parallelism: {pipeline_model_parallel_size: 4,\n"
                            "  virtual_pipeline_model_parallel_size: 2}\n" +
                            cluster(8));
  const BuiltJob b = build(job);
  // pp groups {0, 2, 4, 6}, {1, 3, 5, 7}; the last stage sends to the first.
  EXPECT_EQ(peers_of(b.graph, "pp_next"), (std::vector<Rank>{2, 3, 4, 5, 6, 7, 0, 1}));
  EXPECT_EQ(peers_of(b.graph, "pp_prev"), (std::vector<Rank>{6, 7, 0, 1, 2, 3, 4, 5}));
}

TEST(MegatronLayout, UntiedEmbeddingsHaveNoEmbeddingGroup) {
  const JobSpec job = parse(
      "model: {num_layers: 4, hidden_size: 256, num_attention_heads: 8, vocab_size: 1000,\n"
      "  untie_embeddings_and_output_weights: true}\n"
      "parallelism: {pipeline_model_parallel_size: 2}\n" +
      cluster(4));
  const BuiltJob b = build(job);
  EXPECT_EQ(b.graph.find_slot("embd"), -1);
  EXPECT_EQ(groups_of(b.graph, "dp_cp"), (Groups{{0, 1}, {2, 3}}));
}

std::string moe(int layers, int hidden, int heads, int experts) {
  return "model: {num_layers: " + std::to_string(layers) +
         ", hidden_size: " + std::to_string(hidden) +
         ", num_attention_heads: " + std::to_string(heads) +
         ", vocab_size: 1000, activation: swiglu, normalization: RMSNorm,\n"
         "  num_moe_experts: " +
         std::to_string(experts) + ", moe_router_topk: 2}\n";
}

// Megatron-Core's expert RankGenerator, order tp-ep-dp-pp with tp = etp:
// 16 GPUs, tp = etp 2, ep 4, edp 2.
TEST(MegatronLayout, ExpertGroupsFollowMegatronExpertRankOrder) {
  const JobSpec job =
      parse(moe(2, 256, 8, 8) +
            "parallelism: {tensor_model_parallel_size: 2, sequence_parallel: true,\n"
            "  expert_model_parallel_size: 4}\n" +
            cluster(16));
  ASSERT_EQ(job.expert_dp(), 2);
  const BuiltJob b = build(job);
  const ExecutionGraph& g = b.graph;
  EXPECT_EQ(groups_of(g, "etp"),
            (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}));
  EXPECT_EQ(groups_of(g, "ep"),
            (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}}));
  EXPECT_EQ(groups_of(g, "edp"),
            (Groups{{0, 8}, {1, 9}, {2, 10}, {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15}}));
  EXPECT_EQ(groups_of(g, "tp"), groups_of(g, "etp"));
  // The dense parts: dp 8 over everything but tp.
  EXPECT_EQ(groups_of(g, "dp_cp"),
            (Groups{{0, 2, 4, 6, 8, 10, 12, 14}, {1, 3, 5, 7, 9, 11, 13, 15}}));
}

// Expert groups stay within a pipeline stage; etp 1 differs from tp 2.
TEST(MegatronLayout, ExpertGroupsWithPipelineAndExpertTensorParallelOne) {
  const JobSpec job =
      parse(moe(2, 256, 8, 4) +
            "parallelism: {tensor_model_parallel_size: 2, sequence_parallel: true,\n"
            "  pipeline_model_parallel_size: 2, expert_model_parallel_size: 2,\n"
            "  expert_tensor_parallel_size: 1}\n" +
            cluster(16));
  ASSERT_EQ(job.expert_dp(), 4);
  const BuiltJob b = build(job);
  const ExecutionGraph& g = b.graph;
  EXPECT_EQ(g.find_slot("etp"), -1);
  EXPECT_EQ(groups_of(g, "ep"),
            (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}));
  EXPECT_EQ(groups_of(g, "edp"),
            (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}}));
  EXPECT_EQ(groups_of(g, "tp"),
            (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}));
}

// ---------------------------------------------------------------------------
// Pipeline schedules.

// The role's schedule as "F<mb>" / "B<mb>" (v == 1) or "F<chunk>.<mb>"
// (interleaved), read from the graph: a forward starts at its micro-batch
// marker (Op::arg = micro-batch) and allocates the activations it keeps
// ("act.*"); a backward frees them, which names the forward it undoes. A
// micro-batch's chunks run forward in order on a rank, so its j-th forward is
// chunk j. The first model chunk (stage 0) is checked by its embedding and the
// last (last stage) by its logits.
std::string schedule_of(const Role& role, int stage, int p, int v) {
  struct Fwd {
    int mb, chunk;
    bool embedding = false, logits = false;
  };
  struct Step {
    bool forward;
    int fwd;  // index into fwds: the forward, or the forward a backward undoes
    bool embedding = false, logits = false;  // backward: embedding / output layer
  };
  std::vector<Fwd> fwds;
  std::vector<Step> steps;
  std::map<int, int> seen;   // micro-batch -> forwards so far
  std::map<int, int> owner;  // kept activation's alloc op -> forward
  for (int i = 0; i < static_cast<int>(role.ops.size()); ++i) {
    const Op& op = role.ops[i];
    const std::string n = op.name >= 0 ? role.names[op.name] : std::string();
    const bool kept = n.rfind("act.", 0) == 0;
    if (op.kind == OpKind::kMarker && op.marker == MarkerKind::kMicrobatch) {
      fwds.push_back({op.arg, seen[op.arg]++});
      steps.push_back({true, static_cast<int>(fwds.size()) - 1});
    } else if (op.kind == OpKind::kAlloc && kept) {
      owner[i] = static_cast<int>(fwds.size()) - 1;
    } else if (op.kind == OpKind::kFree && kept) {
      const int f = owner.at(op.ref);
      if (steps.back().forward || steps.back().fwd != f) steps.push_back({false, f});
    } else if (op.kind != OpKind::kCompute) {
      continue;
    } else if (n == "embedding_fwd") {
      fwds.back().embedding = true;
    } else if (n == "logits_fwd") {
      fwds.back().logits = true;
    } else if (n == "logits_dgrad") {
      // The output layer's backward frees the cross entropy's softmax first.
      EXPECT_FALSE(steps.back().forward) << "stage " << stage;
      steps.back().logits = true;
    } else if (n == "embedding_bwd") {
      steps.back().embedding = true;
    }
  }
  std::string out;
  for (const Step& step : steps) {
    const Fwd& x = fwds[step.fwd];
    std::string label = step.forward ? "F" : "B";
    if (v > 1) label += std::to_string(x.chunk) + ".";
    label += std::to_string(x.mb);
    const bool embedding = step.forward ? x.embedding : step.embedding;
    const bool logits = step.forward ? x.logits : step.logits;
    EXPECT_EQ(embedding, stage == 0 && x.chunk == 0) << "stage " << stage << " " << label;
    EXPECT_EQ(logits, stage == p - 1 && x.chunk == v - 1) << "stage " << stage << " " << label;
    out += (out.empty() ? "" : " ") + label;
  }
  return out;
}

BuiltJob pipeline_job(int p, int v, int m, int layers) {
  return build(parse(
      gpt(layers, 256, 8) + "training: {seq_length: 256, global_batch_size: " + std::to_string(m) +
      "}\n" + "parallelism: {pipeline_model_parallel_size: " + std::to_string(p) +
      ", virtual_pipeline_model_parallel_size: " + std::to_string(v) + "}\n" + cluster(p)));
}

// Megatron's forward_backward_pipelining_without_interleaving: stage r runs
// min(p - r - 1, m) warm-up forwards, then 1F1B, then the cool-down backwards.
TEST(MegatronSchedule, OneForwardOneBackward) {
  const BuiltJob b = pipeline_job(4, 1, 8, 4);
  ASSERT_EQ(b.graph.roles.size(), 4u);
  const std::vector<std::string> expected = {
      "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7",
      "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7",
      "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7",
      "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7",
  };
  for (int s = 0; s < 4; ++s) EXPECT_EQ(schedule_of(b.graph.roles[s], s, 4, 1), expected[s]) << s;
}

TEST(MegatronSchedule, FewerMicrobatchesThanStages) {
  const BuiltJob b = pipeline_job(4, 1, 2, 4);
  // Warm-up min(p - r - 1, 2): 2, 2, 1, 0.
  const std::vector<std::string> expected = {"F0 F1 B0 B1", "F0 F1 B0 B1", "F0 F1 B0 B1",
                                             "F0 B0 F1 B1"};
  for (int s = 0; s < 4; ++s) EXPECT_EQ(schedule_of(b.graph.roles[s], s, 4, 1), expected[s]) << s;
}

// Megatron's forward_backward_pipelining_with_interleaving: warm-up
// (p - r - 1) * 2 + (v - 1) * p forwards (all of them when m == p); the k-th
// forward runs chunk (k mod pv) / p on micro-batch (k / pv) p + k mod p, the
// k-th backward chunk v - 1 - (k mod pv) / p on the same micro-batch formula.
TEST(MegatronSchedule, InterleavedTwoStagesTwoChunks) {
  const BuiltJob b = pipeline_job(2, 2, 4, 4);
  // Rank 0: warm-up (2 - 0 - 1) * 2 + 1 * 2 = 4; rank 1: 0 + 2 = 2.
  EXPECT_EQ(schedule_of(b.graph.roles[0], 0, 2, 2),
            "F0.0 F0.1 F1.0 F1.1 "
            "F0.2 B1.0 F0.3 B1.1 F1.2 B0.0 F1.3 B0.1 "
            "B1.2 B1.3 B0.2 B0.3");
  EXPECT_EQ(schedule_of(b.graph.roles[1], 1, 2, 2),
            "F0.0 F0.1 "
            "F1.0 B1.0 F1.1 B1.1 F0.2 B0.0 F0.3 B0.1 F1.2 B1.2 F1.3 B1.3 "
            "B0.2 B0.3");
}

TEST(MegatronSchedule, InterleavedAllWarmupWhenMicrobatchesEqualStages) {
  const BuiltJob b = pipeline_job(2, 2, 2, 4);
  for (int s = 0; s < 2; ++s) {
    EXPECT_EQ(schedule_of(b.graph.roles[s], s, 2, 2), "F0.0 F0.1 F1.0 F1.1 B1.0 B1.1 B0.0 B0.1")
        << s;
  }
}

TEST(MegatronSchedule, InterleavedFourStagesTwoChunks) {
  const BuiltJob b = pipeline_job(4, 2, 8, 8);
  // Rank 0: warm-up 3 * 2 + 4 = 10 of 16.
  EXPECT_EQ(schedule_of(b.graph.roles[0], 0, 4, 2),
            "F0.0 F0.1 F0.2 F0.3 F1.0 F1.1 F1.2 F1.3 F0.4 F0.5 "
            "F0.6 B1.0 F0.7 B1.1 F1.4 B1.2 F1.5 B1.3 F1.6 B0.0 F1.7 B0.1 "
            "B0.2 B0.3 B1.4 B1.5 B1.6 B1.7 B0.4 B0.5 B0.6 B0.7");
  // Rank 3: warm-up 4.
  EXPECT_EQ(schedule_of(b.graph.roles[3], 3, 4, 2),
            "F0.0 F0.1 F0.2 F0.3 "
            "F1.0 B1.0 F1.1 B1.1 F1.2 B1.2 F1.3 B1.3 F0.4 B0.0 F0.5 B0.1 F0.6 B0.2 F0.7 B0.3 "
            "F1.4 B1.4 F1.5 B1.5 F1.6 B1.6 F1.7 B1.7 "
            "B0.4 B0.5 B0.6 B0.7");
}

// Every forward sends its activation to the next stage (or chunk) and every
// backward its gradient back, so the counts follow from the layout.
TEST(MegatronSchedule, PointToPointCounts) {
  const BuiltJob b = pipeline_job(4, 2, 8, 8);
  for (int s = 0; s < 4; ++s) {
    std::map<std::string, int> count;
    for (const Op& op : b.graph.roles[s].ops) {
      if (op.kind == OpKind::kSend || op.kind == OpKind::kRecv)
        ++count[b.graph.roles[s].names[op.name]];
    }
    // Chunks with an input peer: all but (stage 0, chunk 0); output peer: all
    // but (last stage, last chunk). 8 micro-batches each.
    const int with_input = s == 0 ? 1 : 2, with_output = s == 3 ? 1 : 2;
    EXPECT_EQ(count["pp_recv_activation"], 8 * with_input) << s;
    EXPECT_EQ(count["pp_send_grad"], 8 * with_input) << s;
    EXPECT_EQ(count["pp_send_activation"], 8 * with_output) << s;
    EXPECT_EQ(count["pp_recv_grad"], 8 * with_output) << s;
  }
}

// ---------------------------------------------------------------------------
// Activation memory: Korthikanti et al. 2022 (arXiv 2205.05198), table 2,
// per layer, without the 5as/h attention-score term (flash attention keeps
// no score matrix).

JobSpec activation_job(int tp, bool sp, int cp, const std::string& recompute) {
  return parse(gpt(4, 1024, 16) +
               "training: {seq_length: 2048, micro_batch_size: 2, recompute: " + recompute + "}\n" +
               "parallelism: {tensor_model_parallel_size: " + std::to_string(tp) +
               ", sequence_parallel: " + (sp ? "true" : "false") +
               ", context_parallel_size: " + std::to_string(cp) + "}\n" + cluster(8));
}

TEST(MegatronActivations, KorthikantiFormulas) {
  const std::int64_t s = 2048, b = 2, h = 1024;
  const std::int64_t sbh = s * b * h;
  EXPECT_EQ(layer_activation_bytes(activation_job(1, false, 1, "none"), false).count, 34 * sbh);
  for (const int t : {2, 4, 8}) {
    EXPECT_EQ(layer_activation_bytes(activation_job(t, false, 1, "none"), false).count,
              sbh * (10 + 24 / t))
        << t;
    EXPECT_EQ(layer_activation_bytes(activation_job(t, true, 1, "none"), false).count, sbh * 34 / t)
        << t;
  }
  // Full recompute keeps each layer's input: 2sbh, sequence-sharded with SP.
  EXPECT_EQ(layer_activation_bytes(activation_job(1, false, 1, "full"), false).count, 2 * sbh);
  EXPECT_EQ(layer_activation_bytes(activation_job(4, false, 1, "full"), false).count, 2 * sbh);
  EXPECT_EQ(layer_activation_bytes(activation_job(4, true, 1, "full"), false).count, 2 * sbh / 4);
  // Selective recompute re-runs the attention core, which flash attention
  // already does: nothing changes.
  EXPECT_EQ(layer_activation_bytes(activation_job(4, true, 1, "selective"), false),
            layer_activation_bytes(activation_job(4, true, 1, "none"), false));
  // Context parallelism divides the sequence.
  EXPECT_EQ(layer_activation_bytes(activation_job(1, false, 2, "none"), false).count, 34 * sbh / 2);
  EXPECT_EQ(layer_activation_bytes(activation_job(2, true, 2, "none"), false).count, 34 * sbh / 4);
  EXPECT_EQ(layer_activation_bytes(activation_job(4, false, 2, "none"), false).count,
            sbh / 2 * (10 + 24 / 4));
  EXPECT_EQ(layer_activation_bytes(activation_job(2, true, 2, "full"), false).count, 2 * sbh / 4);
}

// The footprint the builder reports, and the activations it allocates per
// layer and micro-batch, are the same figure.
TEST(MegatronActivations, FootprintAndAllocationsAgree) {
  const JobSpec job = activation_job(2, true, 1, "none");
  const BuiltJob b = build(job);
  const Bytes per_layer = layer_activation_bytes(job, false);
  ASSERT_EQ(b.roles.size(), 1u);
  EXPECT_EQ(b.roles[0].activation_bytes_per_layer, per_layer);
  EXPECT_EQ(b.roles[0].num_layers, 4);
  std::set<std::string> names;
  for (const ActivationTensor& t : layer_activation_tensors(job, false))
    names.insert("act." + t.name);
  std::int64_t allocated = 0;
  for (const Op& op : b.graph.roles[0].ops) {
    if (op.kind == OpKind::kAlloc && names.count(b.graph.roles[0].names[op.name]))
      allocated += op.bytes.count;
  }
  EXPECT_EQ(allocated, 4 * job.num_microbatches() * per_layer.count);
}

// ---------------------------------------------------------------------------
// Parameters: one model replica (every stage, every TP rank) against
// count_parameters() (testing::expected_replica_parameters says how they
// differ).

struct DenseCase {
  int tp, pp, vpp;
  bool gpt;  // GPT-style (tied, biases, LayerNorm) or Llama-style (untied, RMSNorm)
};

JobSpec dense_parameter_job(const DenseCase& c) {
  const std::string model =
      c.gpt ? gpt(8, 512, 8, 50257)
            : "model: {num_layers: 8, hidden_size: 512, num_attention_heads: 8,\n"
              "  num_query_groups: 4, ffn_hidden_size: 1376, vocab_size: 32000,\n"
              "  activation: swiglu, normalization: RMSNorm,\n"
              "  untie_embeddings_and_output_weights: true}\n";
  return parse(model + "training: {seq_length: 1024, global_batch_size: " + std::to_string(c.pp) +
               "}\n" + "parallelism: {tensor_model_parallel_size: " + std::to_string(c.tp) +
               ", pipeline_model_parallel_size: " + std::to_string(c.pp) +
               ", virtual_pipeline_model_parallel_size: " + std::to_string(c.vpp) + "}\n" +
               cluster(c.tp * c.pp));
}

TEST(MegatronParameters, DenseReplicaMatchesParameterCount) {
  for (const DenseCase& c :
       {DenseCase{1, 2, 1, true}, DenseCase{2, 2, 1, true}, DenseCase{4, 4, 2, true},
        DenseCase{1, 1, 1, false}, DenseCase{2, 2, 1, false}, DenseCase{4, 4, 2, false}}) {
    const JobSpec job = dense_parameter_job(c);
    const BuiltJob b = build(job);
    EXPECT_EQ(replica_parameters(b, c.tp), expected_replica_parameters(job))
        << "tp " << c.tp << " pp " << c.pp << " vpp " << c.vpp << (c.gpt ? " gpt" : " llama");
  }
}

// With pp 1 the output layer of a tied model is the embedding itself: no copy.
TEST(MegatronParameters, TiedEmbeddingsWithoutPipelineAreHeldOnce) {
  for (const int tp : {1, 2}) {
    const JobSpec job = dense_parameter_job({tp, 1, 1, true});
    const BuiltJob b = build(job);
    EXPECT_EQ(replica_parameters(b, tp), expected_replica_parameters(job)) << "tp " << tp;
  }
}

// Mixtral 8x7B with tp = etp 4, ep 2, pp 4: the tp ranks of a stage hold
// 8 / ep experts of each layer between them.
TEST(MegatronParameters, MoeReplicaMatchesParameterCount) {
  const JobSpec job = parse(
      "model: {preset: mixtral-8x7b}\n"
      "parallelism: {tensor_model_parallel_size: 4, sequence_parallel: true,\n"
      "  pipeline_model_parallel_size: 4, expert_model_parallel_size: 2}\n" +
      cluster(32));
  ASSERT_EQ(job.model.padded_vocab_size(4), 32256);
  const BuiltJob b = build(job);
  const ModelSpec& m = job.model;
  const std::int64_t expert = 3LL * m.hidden_size * m.moe_ffn();  // SwiGLU, no biases
  const std::int64_t missing =
      m.num_layers * (m.num_moe_experts - m.num_moe_experts / job.ep()) * expert;
  EXPECT_EQ(replica_parameters(b, 4), expected_replica_parameters(job) - missing);
  for (const RoleFootprint& f : b.roles) EXPECT_EQ(f.num_layers, 32 / 4);
}

// The distributed optimizer shards the optimizer state over dp x cp (dense)
// and expert_dp (experts); the model state is bf16 weights, fp32 gradients
// and 12 bytes of Adam state per kept parameter.
TEST(MegatronParameters, DistributedOptimizerShardsState) {
  const std::string base =
      gpt(4, 512, 8) + "parallelism: {tensor_model_parallel_size: 2}\n" + cluster(8);
  const BuiltJob plain = build(parse(base));
  const BuiltJob dist = build(parse(base + "training: {use_distributed_optimizer: true}\n"));
  ASSERT_EQ(plain.roles.size(), 1u);
  const RoleFootprint& p = plain.roles[0];
  const RoleFootprint& d = dist.roles[0];
  EXPECT_EQ(p.parameters, d.parameters);
  EXPECT_EQ(p.optimizer_params, p.parameters);
  // One bucket (under 40M parameters), its optimizer state sharded over dp 4.
  EXPECT_EQ(d.optimizer_params, p.parameters / 4);
  for (const RoleFootprint* f : {&p, &d})
    EXPECT_EQ(f->model_state_bytes.count, 6 * f->parameters + 12 * f->optimizer_params);
}

// ---------------------------------------------------------------------------
// Kernels: the list covers every compute op once per signature.

TEST(MegatronKernels, UsesCountEveryComputeOp) {
  const BuiltJob b = pipeline_job(2, 1, 4, 4);
  std::int64_t compute_ops = 0, counted = 0;
  for (const Role& role : b.graph.roles) {
    for (const Op& op : role.ops) compute_ops += op.kind == OpKind::kCompute;
  }
  for (std::size_t i = 0; i < b.kernels.size(); ++i) {
    counted += b.kernels[i].count;
    EXPECT_GT(b.kernels[i].time, SimTime::zero());
    EXPECT_FALSE(b.kernels[i].measured);
    if (i > 0) {
      EXPECT_LT(b.kernels[i - 1].signature, b.kernels[i].signature);
    }
  }
  EXPECT_EQ(counted, compute_ops);
}

// The job runs its GEMMs and attention at its slowest GPU's pace
// (compute/slowest_gpu.h): the same per-rank kernels on 2,048 H100s take
// longer than on 8 by the ratio of the two slowdowns (less the launch floor,
// which is not slowed); memory-bound kernels do not change; an A100 job,
// whose clock spread is in its calibration, does not either.
TEST(MegatronKernels, TensorKernelsRunAtTheSlowestGpusPace) {
  auto job_of = [](int gpus, const std::string& preset) {
    return parse(gpt(2, 1024, 8, 32000) +
                 "training: {seq_length: 1024, global_batch_size: " + std::to_string(gpus) +
                 "}\ncluster: {preset: " + preset + ", num_gpus: " + std::to_string(gpus) + "}\n");
  };
  auto times = [](const BuiltJob& b) {
    std::map<std::string, SimTime> out;
    for (const KernelUse& k : b.kernels) out[k.signature] = k.time;
    return out;
  };
  const GpuSpec h100 = gpu_spec("H100-SXM5-80GB").value();
  const BuiltJob small = build(job_of(8, "dgx-h100"));
  const BuiltJob large = build(job_of(2048, "dgx-h100"));
  EXPECT_DOUBLE_EQ(small.slowest_gpu_slowdown, slowest_gpu_slowdown(h100, 8));
  EXPECT_DOUBLE_EQ(large.slowest_gpu_slowdown, slowest_gpu_slowdown(h100, 2048));
  const double ratio = large.slowest_gpu_slowdown / small.slowest_gpu_slowdown;
  EXPECT_GT(ratio, 1.03);
  const std::map<std::string, SimTime> t8 = times(small), t2048 = times(large);
  ASSERT_EQ(t8.size(), t2048.size());
  int tensor = 0;
  for (const auto& [sig, t] : t8) {
    ASSERT_TRUE(t2048.count(sig)) << sig;
    const double r = t2048.at(sig).seconds() / t.seconds();
    if (sig.rfind("gemm", 0) == 0 || sig.rfind("attn", 0) == 0) {
      ++tensor;
      EXPECT_LE(r, ratio + 1e-9) << sig;
      EXPECT_GT(r, 1 + 0.8 * (ratio - 1)) << sig;
    } else {
      EXPECT_EQ(t2048.at(sig), t) << sig;
    }
  }
  EXPECT_GE(tensor, 6);

  const KernelModel a100(gpu_spec("A100-SXM4-80GB").value(), nullptr);
  const BuiltJob a8 = build_megatron(job_of(8, "dgx-a100"), a100).value();
  const BuiltJob a2048 = build_megatron(job_of(2048, "dgx-a100"), a100).value();
  EXPECT_EQ(a2048.slowest_gpu_slowdown, 1);
  for (const KernelUse& k : a8.kernels) EXPECT_EQ(times(a2048).at(k.signature), k.time);
}

// FLOPs over every rank of the graph's kernels against Megatron-LM's
// num_floating_point_operations(): the GEMMs exactly (3x the forward's: QKV,
// projection, MLP, logits), and the attention forward exactly a third of the
// formula's attention-score term (the backward is 2.5x by FlashAttention's
// count, 2x in Megatron's formula). Context parallelism's ring blocks add up
// to the whole causal square.
struct KernelFlops {
  std::int64_t gemm = 0, attention_forward = 0;
};

KernelFlops graph_flops(const BuiltJob& b, int ranks_per_role) {
  KernelFlops out;
  for (const KernelUse& k : b.kernels) {
    std::map<std::string, std::int64_t> f;
    std::string word;
    std::string kind;
    bool causal = false;
    for (std::size_t at = 0; at <= k.signature.size(); ++at) {
      if (at < k.signature.size() && k.signature[at] != ' ') {
        word += k.signature[at];
        continue;
      }
      const std::size_t eq = word.find('=');
      if (kind.empty()) {
        kind = word;
      } else if (eq != std::string::npos && word.substr(0, eq) != "acc") {  // acc=: a type
        f[word.substr(0, eq)] = std::stoll(word.substr(eq + 1));
      } else if (word == "causal") {
        causal = true;
      }
      word.clear();
    }
    const std::int64_t n = k.count * ranks_per_role;
    if (kind == "gemm") {
      out.gemm += n * 2 * f["m"] * f["n"] * f["k"] * (f.count("batch") ? f["batch"] : 1);
    } else if (kind == "attn_fwd") {
      const Kernel a =
          attention(false, f["b"], f["hq"], f["hkv"], f["sq"], f["skv"], f["d"], causal);
      out.attention_forward += n * static_cast<std::int64_t>(kernel_flops(a));
    }
  }
  return out;
}

TEST(MegatronFlops, KernelsAddUpToMegatronsFormula) {
  const std::vector<std::string> parallel = {
      "{}",
      "{tensor_model_parallel_size: 2, sequence_parallel: true, pipeline_model_parallel_size: 2}",
      "{tensor_model_parallel_size: 4, context_parallel_size: 2}",
      "{context_parallel_size: 4, pipeline_model_parallel_size: 2,\n"
      "  virtual_pipeline_model_parallel_size: 2}",
  };
  for (const bool llama : {false, true}) {
    for (const std::string& par : parallel) {
      const std::string model =
          llama ? "model: {num_layers: 4, hidden_size: 512, num_attention_heads: 8,\n"
                  "  num_query_groups: 4, ffn_hidden_size: 1536, vocab_size: 1000,\n"
                  "  activation: swiglu, normalization: RMSNorm}\n"
                : gpt(4, 512, 8);
      const JobSpec job = parse(
          model + "training: {seq_length: 1024, micro_batch_size: 2, global_batch_size: 32}\n" +
          "parallelism: " + par + "\n" + cluster(16));
      SCOPED_TRACE(model + par);
      const BuiltJob b = build(job);
      const KernelFlops got = graph_flops(b, job.num_gpus / job.pp());
      const ModelSpec& m = job.model;
      const std::int64_t q = std::int64_t{m.num_attention_heads} * m.head_dim();
      const std::int64_t tokens =
          std::int64_t{job.training.global_batch_size} * job.training.seq_length;
      // Megatron's attention-score term: 3 x 2 x (QK^T + (QK^T)V, causal half).
      const std::int64_t scores = tokens * m.num_layers * 3 * 2 * q * job.training.seq_length;
      EXPECT_EQ(got.gemm, static_cast<std::int64_t>(model_flops_per_iteration(job)) - scores);
      EXPECT_EQ(got.attention_forward * 3, scores);
    }
  }
}

TEST(MegatronBuild, RejectsAnInvalidJob) {
  JobSpec job = parse(gpt(4, 256, 8) + cluster(4));
  job.parallelism.tensor_model_parallel_size = 3;  // 8 heads
  Result<BuiltJob> b = build_megatron(job, h100());
  ASSERT_FALSE(b.is_ok());
  EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace prism
