// The slowest of a job's GPUs. Nominally identical GPUs at their power limit
// do not run at one clock: each chip settles at the clock its silicon allows
// under the limit, a persistent difference from chip to chip. A synchronous
// training step runs at the pace of its slowest GPU (a tensor-parallel group
// waits for its slowest member at every layer, a pipeline for its slowest
// stage, the data-parallel reduction for its slowest pipeline), so a job of
// N GPUs runs its tensor kernels at the expected slowest of N chips, not at
// the one chip the kernel database was measured on (docs/compute.md, "The
// slowest GPU").
#pragma once

#include "compute/gpu_spec.h"

namespace prism {

// E[max of n independent standard normal variables]: 0 for n <= 1,
// 1/sqrt(pi) for 2, about 1.54 for 10, 3.24 for 1,000, 3.97 for 16,384.
// Numerical integration on a fixed grid: the same n gives the same bits.
double expected_max_standard_normal(int n);

// How much slower than the median chip a job of `num_gpus` GPUs of type `g`
// runs its GEMMs and attention kernels: 1 + g.sustained_clock_cov x
// expected_max_standard_normal(num_gpus). 1 where the spread is not known
// (cov 0).
double slowest_gpu_slowdown(const GpuSpec& g, int num_gpus);

// `g` with its tensor kernels' sustained slowdowns (bf16 and FP8) multiplied
// by `slowdown`: with slowest_gpu_slowdown(g, N), the GPU a job of N runs at.
GpuSpec slowed_by(GpuSpec g, double slowdown);

}  // namespace prism
