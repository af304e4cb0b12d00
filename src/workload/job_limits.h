// Bounds of a job spec, shared by its defaults (job_spec.cc) and its
// validation (job_validate.cc). Internal to workload/.
#pragma once

#include <cstdint>

namespace prism::job_limits {

// Bounds that keep every derived count (parameters, FLOPs, bytes) well inside
// 64 bits; far beyond any model trained so far.
inline constexpr std::int64_t kMaxDim = 1 << 20;
inline constexpr std::int64_t kMaxLayers = 1 << 14;
inline constexpr std::int64_t kMaxVocab = 1 << 24;
inline constexpr std::int64_t kMaxExperts = 1 << 14;
inline constexpr std::int64_t kMaxSeq = 1 << 24;
inline constexpr std::int64_t kMaxBatch = 1 << 24;
inline constexpr std::int64_t kMaxGpus = std::int64_t{1} << 22;
// The replay unrolls every micro-batch of every layer of a stage (about 85
// op events and 200 bytes each per layer and micro-batch; 2,728,146 events,
// 2.5 s and 0.57 GB for Llama 3 8B at 1,024 micro-batches of 32 layers on 2
// cores): 2^18 layer passes are about 22 M events, 20 s and 5 GB. Published
// runs stay far below it (GPT-3 175B on 1,024 A100s: 96 micro-batches x 12
// layers).
inline constexpr std::int64_t kMaxLayerPasses = std::int64_t{1} << 18;
// An amax history far past any recipe's (NeMo and Megatron-Bridge use 1024).
inline constexpr int kMaxAmaxHistory = 1 << 20;

}  // namespace prism::job_limits
