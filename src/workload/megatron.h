// build_megatron(): the execution graph of one training iteration of a
// JobSpec, as Megatron-Core runs it (docs/simulate.md describes every op).
//
// Layout: Megatron's rank order tp -> cp -> dp -> pp (grid dims "tp", "cp",
// "dp", "pp", innermost first); the experts of MoE layers re-divide each
// pipeline stage as etp -> ep -> edp, as Megatron-Core's expert rank
// generator does. Communicator slots:
//   tp, cp, dp_cp (dense gradients: data- and context-parallel ranks), pp_next,
//   pp_prev, cp_next, cp_prev (ring attention), ep, etp, edp (experts), embd
//   (first and last stage: tied embedding gradients).
// Roles: one per pipeline stage ("stage0" ... ), so a 16,384-GPU job has as
// many programs as stages.
//
// Program of a stage: persistent allocations (bf16 weights, fp32 gradient
// buffer, fp32 optimizer state, sharded by the distributed optimizer), the
// iteration marker, then the pipeline schedule (1F1B, or Megatron's
// interleaved schedule with virtual stages) over micro-batches; each forward
// and backward runs the stage's layers op by op (norms, GEMMs, flash
// attention, TP collectives or SP all-gather/reduce-scatter, CP ring
// exchange, MoE dispatch/combine all-to-all and grouped expert GEMMs). Memory
// is allocated tensor by tensor: each activation a layer keeps where the
// forward makes it, freed after the backward op that last reads it (full
// recompute keeps only layer inputs and re-runs the forward), transients and
// gradients around the ops that use them, pipeline buffers freed with their
// NCCL stream recorded (docs/memory.md). Gradient
// buckets are reduced on the "dp" stream as they become ready in the last
// micro-batch (overlap_grad_reduce) or after the backward; the distributed
// optimizer's parameter all-gather runs after the step or, with
// overlap_param_gather, under the forward. Pipeline sends and receives run on
// their own streams (received ahead, as with overlapped p2p).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compute/kernel.h"
#include "compute/kernel_model.h"
#include "graph/graph.h"
#include "util/status.h"
#include "workload/job_spec.h"

namespace prism {

// One distinct kernel of the graph: how often each iteration runs it (summed
// over roles) and its time.
struct KernelUse {
  std::string signature;
  std::int64_t count = 0;
  SimTime time;
  bool measured = false;  // source != kModel
  KernelSource source = KernelSource::kModel;
};

// Per role: what one rank of the role holds, for reports and tests.
struct RoleFootprint {
  std::int64_t parameters = 0;        // on this rank (dense / tp + experts / (ep * etp))
  std::int64_t optimizer_params = 0;  // parameters whose optimizer state the rank keeps
  int num_layers = 0;                 // transformer layers over its model chunks
  Bytes activation_bytes_per_layer;   // stored from forward to backward, per micro-batch
  Bytes model_state_bytes;            // weights + gradients + optimizer state
};

struct BuiltJob {
  ExecutionGraph graph;
  std::vector<RoleFootprint> roles;  // index = role
  std::vector<KernelUse> kernels;    // sorted by signature
  // The factor by which the job's tensor kernels run slower than the kernel
  // model's GPU because the job runs at its slowest GPU's pace
  // (compute/slowest_gpu.h); 1 where the GPU's clock spread is not known.
  double slowest_gpu_slowdown = 1;
};

// `job` must have passed validate_job(). Kernel times come from `kernels`,
// at the job's scale: its GPU slowed_by(slowest_gpu_slowdown(num_gpus)) (the
// slowest of the job's GPUs), with the same database.
Result<BuiltJob> build_megatron(const JobSpec& job, const KernelModel& kernels);

// One tensor a transformer layer keeps from its forward to its backward. The
// graph allocates it as "act.<name>" (docs/memory.md).
struct ActivationTensor {
  std::string name;
  std::int64_t bytes = 0;
};

// The tensors one transformer layer keeps from its forward to its backward
// for one micro-batch on one rank, in the order the forward creates them:
// Korthikanti et al. 2022's accounting with the job's TP, SP, CP, GQA, gated
// MLP, MoE and attention backend (the unfused one keeps the s^2 softmax);
// full recompute keeps the layer input only.
std::vector<ActivationTensor> layer_activation_tensors(const JobSpec& job, bool moe_layer);
// Their sum.
Bytes layer_activation_bytes(const JobSpec& job, bool moe_layer);

}  // namespace prism
