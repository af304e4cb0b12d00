// A synthetic 3D-parallel (TP x PP x DP) training step shaped like Megatron-LM,
// for tests and scale benchmarks of the replay engine.
//
// Layout: grid dims tp, dp, pp (innermost first, Megatron order). Slots: "tp"
// and "dp" (groups along their dim), "pp_next" / "pp_prev" (peer one step along
// pp, no wrap). One role per pipeline stage ("stage0" .. "stage<P-1>"), so the
// graph holds P programs whatever the world size.
//
// Program of stage s, per iteration: an iteration marker, then Megatron's
// non-interleaved 1F1B schedule over M micro-batches: warmup min(P-s-1, M)
// forwards, steady state of one forward and one backward, cooldown backwards.
// P2P follows Megatron's send_forward_recv_backward / send_backward_recv_forward:
// the send and the receive of a steady-state step form one NCCL group, which
// is what keeps blocking sends on one stream from deadlocking.
//   forward:  [recv activation] then per layer: alloc activation, attention
//             GEMM, TP all-reduce, MLP GEMM, TP all-reduce; [send activation]
//   backward: [recv grad] then per layer (in reverse): MLP GEMM, TP all-reduce,
//             attention GEMM, TP all-reduce, free activation; [send grad]
// During the last backward, gradient buckets are reduced over DP on the "dp"
// stream as soon as their layers are done (event record / wait), overlapping
// the rest of the backward; the optimizer runs once the dp stream is done.
// With the distributed optimizer, buckets are reduce-scattered and updated
// parameters all-gathered after the optimizer step.
// TP (DP) collectives are left out when tp (dp) is 1, as Megatron does.
#pragma once

#include "graph/graph.h"
#include "util/status.h"
#include "util/units.h"

namespace prism {

// Defaults: a GPT-3-175B-like layer (hidden 12288, sequence 2048, micro-batch
// 1, bf16) on H100s at TP8 x PP16 x DP64 = 8,192 GPUs, 8 layers per stage and
// 128 micro-batches per step. That gives 10,896 ops per rank on inner stages
// and 10,640 on the first and last (see tests/workload/synthetic_test.cc).
struct Synthetic3DOptions {
  int tp = 8;
  int pp = 16;
  int dp = 64;
  int gpus_per_node = 8;
  int layers_per_stage = 8;
  int microbatches = 128;
  int iterations = 1;
  int layers_per_bucket = 2;  // DP gradient bucket size, in layers

  // Per layer, per micro-batch, per rank (already divided by tp).
  SimTime attention_forward = SimTime::from_us(900);
  SimTime mlp_forward = SimTime::from_us(1300);
  SimTime attention_backward = SimTime::from_us(1800);
  SimTime mlp_backward = SimTime::from_us(2600);
  SimTime optimizer_step = SimTime::from_ms(10);

  // Activations: sequence x micro-batch x hidden x 2 bytes (bf16).
  Bytes tp_allreduce_bytes{2048LL * 12288 * 2};
  Bytes p2p_bytes{2048LL * 12288 * 2};
  // Activation memory kept from forward to backward, per layer.
  Bytes activation_bytes{256LL << 20};
  // 12 h^2 / tp parameters per layer, bf16 gradients.
  Bytes grad_bytes_per_layer{12LL * 12288 * 12288 / 8 * 2};

  bool distributed_optimizer = false;  // reduce-scatter + all-gather instead of all-reduce
  bool memory_ops = true;              // emit alloc/free of activations
};

// A finalized, validated graph (graph/validate.h), or InvalidArgument for
// options that describe no job (a size below 1).
Result<ExecutionGraph> make_synthetic_3d(const Synthetic3DOptions& options);

}  // namespace prism
