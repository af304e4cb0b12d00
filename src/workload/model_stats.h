// Closed-form sizes of a job's model: parameter counts and the model FLOPs of
// one iteration, the figures users compare with published model sizes and
// Megatron's own throughput log.
#pragma once

#include <cstdint>

#include "workload/job_spec.h"

namespace prism {

struct ParameterCount {
  std::int64_t total = 0;      // every weight, embeddings included (tied ones once)
  std::int64_t active = 0;     // used per token: MoE counts topk routed (+ shared) experts
  std::int64_t embedding = 0;  // input embedding (+ output layer when untied)
  std::int64_t per_layer = 0;  // one transformer layer (the MoE layer for MoE models)
};

// Megatron's layout of the weights: QKV (with GQA), attention output, MLP
// (gated for swiglu), norms and biases as Megatron-Core builds them for the
// spec's activation and normalization; vocabulary as given (unpadded).
ParameterCount count_parameters(const ModelSpec& m);

// Model FLOPs of one iteration (global batch), Megatron-LM's
// num_floating_point_operations() in training.py: 3 x (forward GEMMs +
// attention scores), counting each multiply-add as 2 FLOPs, with GQA, gated
// MLPs, MoE top-k and shared experts, and the output layer; recompute is not
// counted (that is hardware FLOPs). docs/job-spec.md ("Model FLOPs") states
// the formula.
double model_flops_per_iteration(const JobSpec& job);

}  // namespace prism
