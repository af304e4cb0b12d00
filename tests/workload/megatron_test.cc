// Tests of build_megatron() against Megatron-Core itself: its rank order and
// communicator groups (parallel_state's RankGenerator), its pipeline
// schedules (schedules.py), Korthikanti et al. 2022's activation memory, the
// parameter count of model_stats.h and Megatron-LM's FLOP formula; then a
// property test over random small jobs that every built graph replays to
// completion, folded and unfolded alike, with balanced memory.
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
using testing::h100;
using testing::parse;

using Groups = std::vector<std::vector<Rank>>;

// A small GPT-style model (GeLU, LayerNorm, tied embeddings, biases).
std::string gpt(int layers, int hidden, int heads, int vocab = 1000) {
  return "model: {num_layers: " + std::to_string(layers) +
         ", hidden_size: " + std::to_string(hidden) +
         ", num_attention_heads: " + std::to_string(heads) +
         ", vocab_size: " + std::to_string(vocab) + "}\n";
}

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
// count_parameters(), with the differences written out:
//   - Megatron pads the vocabulary to a multiple of 128 tp (each of the
//     embedding and an untied output layer);
//   - TP-replicated parameters (norms, row-parallel biases, the router) are
//     held by each of the tp ranks;
//   - GPT-style models have learned position embeddings (seq_length x h),
//     which count_parameters() leaves out; replicated over TP;
//   - with tied embeddings and pp > 1 the last stage keeps its own copy of
//     the embedding as the output layer.

std::int64_t replica_parameters(const BuiltJob& b, int tp) {
  std::int64_t n = 0;
  for (const RoleFootprint& f : b.roles) n += tp * f.parameters;
  return n;
}

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

std::int64_t expected_replica_parameters(const JobSpec& job) {
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
// Property: random small jobs build, replay to completion on their cluster,
// fold exactly and balance their memory.

struct RandomJob {
  std::string yaml;
  std::string summary;
};

RandomJob random_job(std::mt19937* rng) {
  auto pick = [&](std::initializer_list<int> values) {
    std::vector<int> v(values);
    return v[std::uniform_int_distribution<std::size_t>(0, v.size() - 1)(*rng)];
  };
  const int tp = pick({1, 2, 4}), cp = pick({1, 2}), pp = pick({1, 2, 4});
  int dp = pick({1, 2, 4});
  while (tp * cp * pp * dp > 64 && dp > 1) dp /= 2;
  const int vpp = pp > 1 ? pick({1, 2}) : 1;
  const bool is_moe = pick({0, 1}) == 1;
  const int ep = is_moe ? pick({1, 2, 4}) : 1;
  const bool sp = pick({0, 1}) == 1 || (ep > 1 && tp > 1);
  const char* recompute[] = {"none", "selective", "full"};
  const bool dist = pick({0, 1}) == 1;
  const bool grad_overlap = pick({0, 1}) == 1;
  const bool param_overlap = dist && grad_overlap && pick({0, 1}) == 1;
  const int layers = pp * vpp * pick({1, 2});
  const int hidden = pick({256, 512, 1024});
  const int seq = pick({256, 512, 1024, 2048});
  const int m = vpp > 1 ? pp * pick({1, 2}) : pick({1, 2, 3, 4});
  std::string model = "model: {num_layers: " + std::to_string(layers) +
                      ", hidden_size: " + std::to_string(hidden) +
                      ", num_attention_heads: 8, vocab_size: 5000";
  if (is_moe) {
    model +=
        ", activation: swiglu, normalization: RMSNorm, num_moe_experts: 8, "
        "moe_router_topk: 2, moe_ffn_hidden_size: " +
        std::to_string(hidden);
  }
  if (pick({0, 1}) == 1) model += ", num_query_groups: 4";
  model += "}\n";
  RandomJob j;
  j.yaml = model + "training: {seq_length: " + std::to_string(seq) +
           ", global_batch_size: " + std::to_string(m * dp) +
           ", recompute: " + recompute[pick({0, 1, 2})] +
           ", use_distributed_optimizer: " + (dist ? "true" : "false") +
           ", overlap_grad_reduce: " + (grad_overlap ? "true" : "false") +
           ", overlap_param_gather: " + (param_overlap ? "true" : "false") +
           ", bucket_size: " + std::to_string(pick({0, 1000000})) + "}\n" +
           "parallelism: {tensor_model_parallel_size: " + std::to_string(tp) +
           ", sequence_parallel: " + (sp ? "true" : "false") +
           ", context_parallel_size: " + std::to_string(cp) +
           ", pipeline_model_parallel_size: " + std::to_string(pp) +
           ", virtual_pipeline_model_parallel_size: " + std::to_string(vpp) +
           ", expert_model_parallel_size: " + std::to_string(ep) + "}\n" +
           cluster(tp * cp * pp * dp);
  return j;
}

ReplayResult replay_on_cluster(const JobSpec& job, const ExecutionGraph& g, bool fold,
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
std::multiset<std::string> unfreed(const Role& role) {
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

void check_random_job(const JobSpec& job, const std::string& yaml) {
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

TEST(MegatronProperty, RandomJobsReplayFoldAndBalanceMemory) {
  std::mt19937 rng(20240611);
  int built = 0, rejected = 0;
  std::map<std::string, int> coverage;  // jobs with each feature on
  while (built < 50) {
    const RandomJob rj = random_job(&rng);
    Result<JobSpec> job = parse_job_yaml(rj.yaml, "<random>");
    if (!job.is_ok()) {
      ++rejected;
      ASSERT_LT(rejected, 200) << "too many invalid random jobs; last: " << job.status().message();
      continue;
    }
    check_random_job(job.value(), rj.yaml);
    ++built;
    const JobSpec& j = job.value();
    coverage["tp"] += j.tp() > 1;
    coverage["sp"] += j.parallelism.sequence_parallel;
    coverage["cp"] += j.cp() > 1;
    coverage["pp"] += j.pp() > 1;
    coverage["vpp"] += j.vpp() > 1;
    coverage["dp"] += j.dp() > 1;
    coverage["moe"] += j.model.is_moe();
    coverage["ep"] += j.ep() > 1;
    coverage["full"] += j.training.recompute == Recompute::kFull;
    coverage["dist"] += j.training.use_distributed_optimizer;
    coverage["grad_overlap"] += j.training.overlap_grad_reduce;
    coverage["param_overlap"] += j.training.overlap_param_gather;
    if (::testing::Test::HasFatalFailure()) return;
  }
  // The seed draws every feature at least twice.
  for (const auto& [feature, jobs] : coverage) EXPECT_GE(jobs, 2) << feature;
  EXPECT_EQ(coverage.size(), 12u);
}

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
