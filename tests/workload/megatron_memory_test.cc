// Tests of the memory side of build_megatron(): the per-tensor activation
// allocations against Korthikanti et al. 2022 (arXiv 2205.05198), the model
// state against Megatron's distributed-optimizer accounting (18 bytes per
// parameter, 6 + 12/d with the distributed optimizer), where tensors live,
// the pipeline's send and receive buffers and their record streams, and the
// micro-batches 1F1B keeps in flight. All on the graph, without a replay.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "megatron_test_util.h"
#include "workload/megatron.h"

namespace prism {
namespace {

using testing::build;
using testing::cluster;
using testing::parse;

// GPT-style (GeLU, LayerNorm): s = 2048, b = 2, h = 1024, a = 16.
constexpr std::int64_t kS = 2048, kB = 2, kH = 1024, kA = 16;
constexpr std::int64_t kSbh = kS * kB * kH;
constexpr std::int64_t kScores = 5 * kA * kS * kS * kB;  // Korthikanti's 5 a s^2 b

JobSpec korthikanti_job(int tp, bool sp, const std::string& recompute, const std::string& backend) {
  return parse(
      "model: {num_layers: 4, hidden_size: 1024, num_attention_heads: 16, vocab_size: 1000}\n"
      "training: {seq_length: 2048, micro_batch_size: 2, recompute: " +
      recompute + ", attention_backend: " + backend + "}\n" +
      "parallelism: {tensor_model_parallel_size: " + std::to_string(tp) +
      ", sequence_parallel: " + (sp ? "true" : "false") + "}\n" + cluster(8));
}

std::int64_t list_sum(const std::vector<ActivationTensor>& list) {
  std::int64_t sum = 0;
  for (const ActivationTensor& t : list) sum += t.bytes;
  return sum;
}

// ---------------------------------------------------------------------------
// The tensor list.

// Korthikanti's table 2 with the unfused attention's 5 a s^2 b term, which
// selective recompute removes; the list's sum is layer_activation_bytes().
TEST(MegatronMemoryTensors, UnfusedAttentionAddsTheScoreTerm) {
  EXPECT_EQ(layer_activation_bytes(korthikanti_job(1, false, "none", "unfused"), false).count,
            34 * kSbh + kScores);
  for (const int t : {2, 4, 8}) {
    EXPECT_EQ(layer_activation_bytes(korthikanti_job(t, false, "none", "unfused"), false).count,
              kSbh * (10 + 24 / t) + kScores / t)
        << t;
    EXPECT_EQ(layer_activation_bytes(korthikanti_job(t, true, "none", "unfused"), false).count,
              kSbh * 34 / t + kScores / t)
        << t;
    EXPECT_EQ(layer_activation_bytes(korthikanti_job(t, true, "selective", "unfused"), false).count,
              kSbh * 34 / t)
        << t;
  }
  EXPECT_EQ(layer_activation_bytes(korthikanti_job(4, true, "full", "unfused"), false).count,
            2 * kSbh / 4);
}

TEST(MegatronMemoryTensors, ListIsTheSingleSourceOfTheLayerBytes) {
  for (const std::string backend : {"flash", "unfused"}) {
    for (const std::string recompute : {"none", "selective", "full"}) {
      for (const int tp : {1, 4}) {
        const JobSpec job = korthikanti_job(tp, tp > 1, recompute, backend);
        const std::vector<ActivationTensor> list = layer_activation_tensors(job, false);
        EXPECT_EQ(list_sum(list), layer_activation_bytes(job, false).count);
        std::set<std::string> names;
        for (const ActivationTensor& t : list) {
          EXPECT_GT(t.bytes, 0) << t.name;
          EXPECT_TRUE(names.insert(t.name).second) << "duplicate " << t.name;
        }
        EXPECT_EQ(names.count("norm1_input"), 1u);
        if (recompute == "full") {
          EXPECT_EQ(list.size(), 1u);
        }
      }
    }
  }
}

// The MoE block: router logits (fp32), the routed tokens at this rank's
// experts, their FC1 and activation outputs, and the shared expert's.
TEST(MegatronMemoryTensors, MoeLayerTensors) {
  // h 256, 8 experts top-2 on ep 2 (4 local), tp = etp 2 with SP,
  // moe_ffn 512 (SwiGLU: FC1 out 2 x 512 / 2), shared expert 256.
  const JobSpec job = parse(
      "model: {num_layers: 2, hidden_size: 256, num_attention_heads: 8, vocab_size: 1000,\n"
      "  activation: swiglu, normalization: RMSNorm, num_moe_experts: 8, moe_router_topk: 2,\n"
      "  moe_ffn_hidden_size: 512, moe_shared_expert_intermediate_size: 256}\n"
      "training: {seq_length: 1024, micro_batch_size: 1}\n"
      "parallelism: {tensor_model_parallel_size: 2, sequence_parallel: true,\n"
      "  expert_model_parallel_size: 2}\n" +
      cluster(4));
  std::map<std::string, std::int64_t> bytes;
  for (const ActivationTensor& t : layer_activation_tensors(job, true)) bytes[t.name] = t.bytes;
  const std::int64_t T = 1024, Tsp = T / 2, h = 256;
  // Tokens at the local experts: Tsp k ep etp / E per expert, 4 experts.
  const std::int64_t N = Tsp * 2 * 2 * 2 / 8 * 4;
  EXPECT_EQ(bytes.at("router_input"), 2 * Tsp * h);
  EXPECT_EQ(bytes.at("router_logits"), 4 * Tsp * 8);
  EXPECT_EQ(bytes.at("expert_input"), 2 * N * h);
  EXPECT_EQ(bytes.at("expert_fc1_output"), 2 * N * 2 * 512 / 2);
  EXPECT_EQ(bytes.at("expert_act_output"), 2 * N * 512 / 2);
  EXPECT_EQ(bytes.at("shared_fc1_output"), 2 * T * 2 * 256 / 2);
  EXPECT_EQ(bytes.at("shared_act_output"), 2 * T * 256 / 2);
  EXPECT_EQ(bytes.count("fc1_input"), 0u);
  EXPECT_EQ(list_sum(layer_activation_tensors(job, true)), layer_activation_bytes(job, true).count);
}

// ---------------------------------------------------------------------------
// The graph's allocations.

struct NameUse {
  int allocs = 0, frees = 0;
  std::set<std::int64_t> sizes;
};

std::map<std::string, NameUse> uses(const Role& role) {
  std::map<std::string, NameUse> out;
  for (const Op& op : role.ops) {
    if (op.kind != OpKind::kAlloc && op.kind != OpKind::kFree) continue;
    NameUse& u = out[role.names[op.name]];
    if (op.kind == OpKind::kAlloc) {
      ++u.allocs;
      u.sizes.insert(op.bytes.count);
    } else {
      ++u.frees;
    }
  }
  return out;
}

// Allocations of the role that no free releases, by name.
std::multiset<std::string> unfreed(const Role& role) {
  std::vector<bool> freed(role.ops.size(), false);
  for (const Op& op : role.ops) {
    if (op.kind != OpKind::kFree) continue;
    EXPECT_EQ(role.ops[op.ref].kind, OpKind::kAlloc);
    EXPECT_FALSE(freed[op.ref]) << role.name << " frees op " << op.ref << " twice";
    freed[op.ref] = true;
    EXPECT_EQ(op.name, role.ops[op.ref].name) << role.name << ": a free names its alloc";
  }
  std::multiset<std::string> out;
  for (std::size_t i = 0; i < role.ops.size(); ++i) {
    if (role.ops[i].kind == OpKind::kAlloc && !freed[i]) out.insert(role.names[role.ops[i].name]);
  }
  return out;
}

// A job shape: extra training fields, the parallelism, and GPUs (dp 1).
struct Config {
  std::string training, parallelism;
  int gpus;
};

const std::vector<Config> kDenseConfigs = {
    {"", "tensor_model_parallel_size: 2, sequence_parallel: true", 2},
    {"", "tensor_model_parallel_size: 2, pipeline_model_parallel_size: 2", 4},
    {"",
     "context_parallel_size: 2, pipeline_model_parallel_size: 2, "
     "virtual_pipeline_model_parallel_size: 2",
     4},
    {"recompute: full",
     "tensor_model_parallel_size: 2, sequence_parallel: true, pipeline_model_parallel_size: 2", 4},
    {"attention_backend: unfused", "tensor_model_parallel_size: 2", 2},
    {"attention_backend: unfused, recompute: selective",
     "tensor_model_parallel_size: 2, sequence_parallel: true", 2},
    {"attention_backend: unfused, recompute: full", "pipeline_model_parallel_size: 2", 2},
};

const std::vector<Config> kMoeConfigs = {
    {"", "tensor_model_parallel_size: 2, sequence_parallel: true, expert_model_parallel_size: 2",
     4},
    {"", "expert_model_parallel_size: 4", 4},
    {"recompute: full",
     "tensor_model_parallel_size: 2, sequence_parallel: true, pipeline_model_parallel_size: 2, "
     "expert_model_parallel_size: 2, expert_tensor_parallel_size: 1",
     4},
};

std::string dense_model() {
  return "model: {num_layers: 4, hidden_size: 256, num_attention_heads: 8, vocab_size: 1000}\n";
}

std::string moe_model() {
  return "model: {num_layers: 4, hidden_size: 256, num_attention_heads: 8, vocab_size: 1000,\n"
         "  activation: swiglu, normalization: RMSNorm, num_moe_experts: 8, moe_router_topk: 2,\n"
         "  moe_shared_expert_intermediate_size: 512}\n";
}

JobSpec config_job(bool moe, const Config& c, int m) {
  return parse((moe ? moe_model() : dense_model()) +
               "training: {seq_length: 512, global_batch_size: " + std::to_string(m) +
               (c.training.empty() ? "" : ", " + c.training) + "}\n" + "parallelism: {" +
               c.parallelism + "}\n" + cluster(c.gpus));
}

std::string trace(const Config& c) {
  return c.training + " / " + c.parallelism;
}

// Every layer of every micro-batch allocates each tensor of its list once, at
// its size, as "act.<name>"; the first layer of a chunk with a predecessor
// gets its input from the pipeline receive. Full recompute re-makes the rest
// as "recomputed.<name>" in the backward.
TEST(MegatronMemoryGraph, EachLayerAllocatesItsListOncePerMicrobatch) {
  for (const bool moe : {false, true}) {
    for (const Config& config : moe ? kMoeConfigs : kDenseConfigs) {
      SCOPED_TRACE(trace(config));
      const JobSpec job = config_job(moe, config, 4);
      const int m = job.num_microbatches();
      const BuiltJob b = build(job);
      JobSpec no_recompute = job;
      no_recompute.training.recompute = Recompute::kNone;
      const bool full = job.training.recompute == Recompute::kFull;
      for (std::size_t r = 0; r < b.graph.roles.size(); ++r) {
        const Role& role = b.graph.roles[r];
        const std::map<std::string, NameUse> u = uses(role);
        const int layers = b.roles[r].num_layers;
        // Chunks whose first layer's input comes from the pipeline receive.
        const int received = r > 0 ? job.vpp() : job.vpp() - 1;
        std::int64_t kept = 0;
        for (const ActivationTensor& t : layer_activation_tensors(job, moe)) {
          const int expected = m * (t.name == "norm1_input" ? layers - received : layers);
          const auto it = u.find("act." + t.name);
          if (expected == 0) {
            EXPECT_EQ(it, u.end()) << role.name << " " << t.name;
            continue;
          }
          ASSERT_NE(it, u.end()) << t.name;
          EXPECT_EQ(it->second.allocs, expected) << role.name << " " << t.name;
          EXPECT_EQ(it->second.frees, expected) << role.name << " " << t.name;
          EXPECT_EQ(it->second.sizes, std::set<std::int64_t>{t.bytes}) << t.name;
          kept += static_cast<std::int64_t>(it->second.allocs) * t.bytes;
        }
        if (received > 0) {
          const NameUse& recv = u.at("pp_recv_activation");
          EXPECT_EQ(recv.allocs, m * received) << role.name;
          kept += *recv.sizes.begin() * recv.allocs;
        }
        EXPECT_EQ(kept, std::int64_t{m} * layers * layer_activation_bytes(job, moe).count)
            << role.name;
        // Selective recompute of the unfused attention re-runs the core
        // attention (its context output made and dropped again).
        const bool rerun = job.training.recompute == Recompute::kSelective &&
                           is_unfused(job.training.attention_backend);
        const std::set<std::string> core = {"attn_softmax", "attn_softmax_dropout_mask",
                                            "attn_probs", "attn_out"};
        for (const ActivationTensor& t : layer_activation_tensors(no_recompute, moe)) {
          if (t.name == "norm1_input") continue;
          const auto it = u.find("recomputed." + t.name);
          const bool remade = full || (rerun && core.count(t.name) > 0);
          EXPECT_EQ(it != u.end() ? it->second.allocs : 0, remade ? m * layers : 0)
              << role.name << " " << t.name;
        }
      }
    }
  }
}

TEST(MegatronMemoryGraph, OnlyTheModelStateOutlivesTheIteration) {
  for (const bool moe : {false, true}) {
    for (const Config& config : moe ? kMoeConfigs : kDenseConfigs) {
      SCOPED_TRACE(trace(config));
      const BuiltJob b = build(config_job(moe, config, 4));
      for (const Role& role : b.graph.roles) {
        EXPECT_EQ(unfreed(role),
                  (std::multiset<std::string>{"weights", "grad_buffer", "optimizer_state"}))
            << role.name;
        // Record-stream masks name the role's own streams, and only pipeline
        // buffers have any.
        for (const Op& op : role.ops) {
          if (op.kind != OpKind::kFree || op.arg == 0) continue;
          EXPECT_EQ(op.arg >> role.streams.size(), 0) << role.name;
          EXPECT_EQ(role.names[op.name].rfind("pp_", 0), 0u) << role.names[op.name];
        }
      }
    }
  }
}

// Megatron's distributed-optimizer accounting (docs/source/api-guide/
// dist_optimizer.md): bf16 weights 2 + fp32 gradients 4 + fp32 master, Adam
// m and v 12 = 18 bytes per parameter; the distributed optimizer shards the
// 12 over d = dp x cp: 6 + 12 / d.
TEST(MegatronMemoryGraph, ModelStateIsMegatronsBytesPerParameter) {
  struct Case {
    int dp, cp;
    bool dist;
  };
  for (const Case c : {Case{4, 1, false}, Case{4, 1, true}, Case{2, 2, true}, Case{1, 4, true},
                       Case{2, 1, true}}) {
    SCOPED_TRACE(std::to_string(c.dp) + " dp, " + std::to_string(c.cp) + " cp" +
                 (c.dist ? ", distributed" : ""));
    const int tp = 2, pp = 2;
    const JobSpec job =
        parse(dense_model() + "training: {seq_length: 512, use_distributed_optimizer: " +
              (c.dist ? "true" : "false") + "}\n" +
              "parallelism: {tensor_model_parallel_size: 2, pipeline_model_parallel_size: 2, "
              "context_parallel_size: " +
              std::to_string(c.cp) + "}\n" + cluster(tp * pp * c.cp * c.dp));
    ASSERT_EQ(job.dp(), c.dp);
    const BuiltJob b = build(job);
    const std::int64_t d = c.dist ? c.dp * c.cp : 1;
    for (std::size_t r = 0; r < b.graph.roles.size(); ++r) {
      const Role& role = b.graph.roles[r];
      const std::int64_t P = b.roles[r].parameters;
      std::int64_t state = 0;
      bool before_iteration = true;
      for (const Op& op : role.ops) {
        if (op.kind == OpKind::kMarker && op.marker == MarkerKind::kIteration)
          before_iteration = false;
        const std::string& n = op.name >= 0 ? role.names[op.name] : "";
        if (op.kind != OpKind::kAlloc ||
            (n != "weights" && n != "grad_buffer" && n != "optimizer_state"))
          continue;
        EXPECT_TRUE(before_iteration) << n;
        state += op.bytes.count;
      }
      // One bucket per stage (under 40M parameters): its optimizer state is
      // P / d parameters, rounded down.
      EXPECT_EQ(state, 6 * P + 12 * (P / d)) << role.name;
      EXPECT_EQ(state, b.roles[r].model_state_bytes.count) << role.name;
      if (!c.dist) {
        EXPECT_EQ(state, 18 * P) << role.name;
      }
      EXPECT_NEAR(static_cast<double>(state) / static_cast<double>(P),
                  6.0 + 12.0 / static_cast<double>(d), 1e-6)
          << role.name;
    }
  }
}

int stream_of(const Role& role, const std::string& name) {
  for (std::size_t i = 0; i < role.streams.size(); ++i)
    if (role.streams[i] == name) return static_cast<int>(i);
  ADD_FAILURE() << "no stream " << name;
  return 0;
}

// The forward's output and the backward's input gradient are freed right
// after their send is issued, recorded on the send stream (Megatron's
// deallocate_output_tensor and c10d's record_stream); received tensors are
// allocated before their receive and recorded on its stream.
TEST(MegatronMemoryGraph, PipelineBuffersRecordTheirStreams) {
  const JobSpec job = parse(dense_model() +
                            "training: {seq_length: 512, global_batch_size: 8}\n"
                            "parallelism: {tensor_model_parallel_size: 2, sequence_parallel: "
                            "true, pipeline_model_parallel_size: 2,\n"
                            "  virtual_pipeline_model_parallel_size: 2}\n" +
                            cluster(4));
  const BuiltJob b = build(job);
  const std::int64_t p2p_bytes = 2 * 512 / 2 * 256;  // 2 T_sp h
  for (const Role& role : b.graph.roles) {
    SCOPED_TRACE(role.name);
    const std::map<std::string, std::pair<int, int>> send = {
        {"pp_send_activation", {stream_of(role, "pp_send_fwd"), 0}},
        {"pp_send_grad", {stream_of(role, "pp_send_bwd"), 0}}};
    const std::map<std::string, int> recv = {{"pp_recv_activation", stream_of(role, "pp_recv_fwd")},
                                             {"pp_recv_grad", stream_of(role, "pp_recv_bwd")}};
    std::map<std::string, int> sends, frees, recvs;
    for (std::size_t i = 0; i < role.ops.size(); ++i) {
      const Op& op = role.ops[i];
      if (op.name < 0) continue;
      const std::string& n = role.names[op.name];
      if (op.kind == OpKind::kSend) ++sends[n];
      if (op.kind == OpKind::kRecv) ++recvs[n];
      if (op.kind == OpKind::kFree && send.count(n)) {
        const int stream = send.at(n).first;
        EXPECT_EQ(op.arg, 1 << stream) << n;
        // Freed as soon as the send is issued.
        ASSERT_GT(i, 0u);
        const Op& prev = role.ops[i - 1];
        EXPECT_EQ(prev.kind, OpKind::kSend) << n;
        EXPECT_EQ(prev.stream, stream) << n;
        EXPECT_EQ(role.ops[op.ref].bytes.count, p2p_bytes) << n;
        ++frees[n];
      }
      if (op.kind == OpKind::kFree && recv.count(n)) {
        EXPECT_EQ(op.arg, 1 << recv.at(n)) << n;
        ++frees[n];
      }
      if (op.kind == OpKind::kAlloc && recv.count(n)) {
        ASSERT_LT(i + 1, role.ops.size());
        const Op& next = role.ops[i + 1];
        EXPECT_EQ(next.kind, OpKind::kRecv) << n;
        EXPECT_EQ(next.stream, recv.at(n)) << n;
        EXPECT_EQ(op.bytes.count, p2p_bytes) << n;
      }
    }
    for (const std::string n : {"pp_send_activation", "pp_send_grad"}) {
      EXPECT_GT(sends[n], 0) << n;
      EXPECT_EQ(frees[n], sends[n]) << n;
    }
    for (const std::string n : {"pp_recv_activation", "pp_recv_grad"}) {
      EXPECT_GT(recvs[n], 0) << n;
      EXPECT_EQ(frees[n], recvs[n]) << n;
    }
  }
}

// Bytes allocated on the role's compute stream (where every alloc and free
// is) just before op `end`; frees count at once, deferred or not, as
// PyTorch's memory_allocated() does.
std::int64_t live_before(const Role& role, std::size_t end) {
  std::int64_t live = 0;
  for (std::size_t i = 0; i < end; ++i) {
    const Op& op = role.ops[i];
    if (op.kind == OpKind::kAlloc) live += op.bytes.count;
    if (op.kind == OpKind::kFree) live -= role.ops[op.ref].bytes.count;
  }
  return live;
}

// 1F1B: when stage r starts its first backward it holds p - r micro-batches'
// activations (Korthikanti's count per layer times its layers), plus the
// embedding's dropout mask for each on the first stage.
TEST(MegatronMemoryGraph, OneForwardOneBackwardHoldsStagesMinusRankMicrobatches) {
  const int p = 4;
  const JobSpec job = parse(dense_model() +
                            "training: {seq_length: 512, global_batch_size: 8}\n"
                            "parallelism: {tensor_model_parallel_size: 2, sequence_parallel: "
                            "true, pipeline_model_parallel_size: 4}\n" +
                            cluster(8));
  const BuiltJob b = build(job);
  const std::int64_t per_layer = layer_activation_bytes(job, false).count;
  const std::int64_t mask = 512 / 2 * 256;  // T_sp h
  for (int r = 0; r < p - 1; ++r) {
    const Role& role = b.graph.roles[r];
    std::size_t first_backward = 0;
    for (std::size_t i = 0; i < role.ops.size() && first_backward == 0; ++i) {
      const Op& op = role.ops[i];
      if (op.kind == OpKind::kAlloc && role.names[op.name] == "pp_recv_grad") first_backward = i;
    }
    ASSERT_GT(first_backward, 0u) << r;
    const std::int64_t in_flight = p - r;
    EXPECT_EQ(live_before(role, first_backward),
              b.roles[r].model_state_bytes.count +
                  in_flight * (b.roles[r].num_layers * per_layer + (r == 0 ? mask : 0)))
        << "stage " << r;
  }
}

std::string compute_before(const Role& role, std::size_t i) {
  while (i-- > 0)
    if (role.ops[i].kind == OpKind::kCompute) return role.names[role.ops[i].name];
  return "";
}

std::string compute_after(const Role& role, std::size_t i) {
  while (++i < role.ops.size())
    if (role.ops[i].kind == OpKind::kCompute) return role.names[role.ops[i].name];
  return "";
}

// Each kept tensor is allocated just before the kernel that writes it and
// freed after the backward kernel that last reads it.
TEST(MegatronMemoryGraph, TensorsLiveFromTheirWriterToTheirLastReader) {
  const JobSpec job = parse(
      "model: {num_layers: 1, hidden_size: 256, num_attention_heads: 8, vocab_size: 1000}\n"
      "training: {seq_length: 512}\n" +
      cluster(1));
  const BuiltJob b = build(job);
  const Role& role = b.graph.roles[0];
  const std::map<std::string, std::pair<std::string, std::string>> expected = {
      // tensor: {first kernel after its alloc, last kernel before its free}
      {"act.qkv_input", {"norm_fwd", "qkv_wgrad"}},
      {"act.qkv", {"qkv_fwd", "attn_bwd"}},
      {"act.attn_out", {"attn_fwd", "attn_bwd"}},
      {"act.attn_dropout_mask", {"residual_fwd", "residual_bwd"}},
      {"act.norm2_input", {"residual_fwd", "norm_bwd"}},
      {"act.fc1_input", {"norm_fwd", "fc1_wgrad"}},
      {"act.fc1_output", {"fc1_fwd", "gelu_bwd"}},
      {"act.act_output", {"gelu_fwd", "fc2_wgrad"}},
      {"act.mlp_dropout_mask", {"residual_fwd", "residual_bwd"}},
      {"grad.fc1_output", {"gelu_bwd", "fc1_wgrad"}},
      {"act.logits_fp32", {"cross_entropy_fwd", "cross_entropy_grad_cast"}},
      {"logits", {"logits_fwd", "cross_entropy_fwd"}},
  };
  std::set<std::string> seen;
  for (std::size_t i = 0; i < role.ops.size(); ++i) {
    const Op& op = role.ops[i];
    if (op.kind != OpKind::kAlloc && op.kind != OpKind::kFree) continue;
    const std::string& n = role.names[op.name];
    const auto it = expected.find(n);
    if (it == expected.end()) continue;
    if (op.kind == OpKind::kAlloc) {
      EXPECT_EQ(compute_after(role, i), it->second.first) << n;
    } else {
      EXPECT_EQ(compute_before(role, i), it->second.second) << n;
      seen.insert(n);
    }
  }
  EXPECT_EQ(seen.size(), expected.size());
}

// With SP each column-parallel input is all-gathered into a transient
// full-sequence buffer, forward and again backward; without SP there is none.
TEST(MegatronMemoryGraph, SequenceParallelGathersAreTransient) {
  const int m = 2;
  for (const bool sp : {false, true}) {
    const JobSpec job = parse(
        dense_model() + "training: {seq_length: 512, global_batch_size: " + std::to_string(m) +
        "}\n" + "parallelism: {tensor_model_parallel_size: 2, sequence_parallel: " +
        (sp ? "true" : "false") + "}\n" + cluster(2));
    const BuiltJob b = build(job);
    const std::map<std::string, NameUse> u = uses(b.graph.roles[0]);
    const std::int64_t Th = 2 * 512 * 256;  // 2 T h
    for (const std::string t : {"qkv_input", "fc1_input"}) {
      const auto it = u.find("gathered." + t);
      if (!sp) {
        EXPECT_EQ(it, u.end()) << t;
        continue;
      }
      ASSERT_NE(it, u.end()) << t;
      EXPECT_EQ(it->second.allocs, 2 * 4 * m) << t;  // forward and backward, 4 layers
      EXPECT_EQ(it->second.sizes, std::set<std::int64_t>{Th}) << t;
    }
    // The gradient of the largest intermediate, FC1's output (4 h, GeLU).
    EXPECT_EQ(u.at("grad.fc1_output").sizes, std::set<std::int64_t>{2 * 512 * 4 * 256 / 2});
    EXPECT_EQ(u.at("grad.fc1_output").allocs, 4 * m);
    // The gradient flowing between layers: one per layer, sequence-sharded.
    EXPECT_EQ(u.at("grad.norm1_input").allocs, 4 * m);
    EXPECT_EQ(u.at("grad.norm1_input").sizes, std::set<std::int64_t>{2 * 512 / (sp ? 2 : 1) * 256});
  }
}

}  // namespace
}  // namespace prism
