// KernelModel: time of a Kernel on one GPU. A measured-kernel database
// (compute/kernel_db.h) answers where it has the kernel's signature;
// otherwise efficiency curves over the GPU's peaks (compute/gpu_spec.h) do:
// GEMMs by their shape (wave quantization over the SMs, small-dimension
// penalty), flash attention by its shape, memory-bound kernels by their
// traffic at the achievable HBM bandwidth. One set of curve constants per GPU
// type (docs/compute.md gives them and their calibration).
//
// The curves (E = the GPU's efficiency cap for the kernel's type, P = its
// peak for the input type, k_half = the GPU's GEMM k half-point for the type,
// S = SMs, L = launch overhead):
//   GEMM       tiles of tm x tn (the GPU's large tile, or tm x tn/2 at 0.9 of
//              its rate; the faster is taken, as cuBLAS's heuristics would):
//              waves = ceil(ceil(m/tm) ceil(n/tn) batch / S),
//              wave  = 2 tm tn (k + k_half) / (E P / S)   [rate k/(k+k_half)],
//              t     = max(waves * wave, bytes / (hbm_eff * HBM)) + L
//   attention  work per (batch, head) in key-equivalents: the unmasked area
//              plus, per row of the parallel dimension (queries forward, keys
//              backward; padded to 128-row blocks), seq_half + 64 if causal;
//              flops-equivalent = 4 (x2.5 backward) * work * (d + d_half).
//              t = max(total / (E P), longest block, full blocks in waves)
//                  then max with the HBM floor, + L
//   memory     t = max(bytes / (hbm_eff * HBM), flops / P) + L
// Every curve is non-decreasing in every size, never beats max(flops / peak,
// bytes / HBM), and tends to the cap for large shapes.
#pragma once

#include "compute/gpu_spec.h"
#include "compute/kernel.h"
#include "compute/kernel_db.h"
#include "util/units.h"

namespace prism {

class KernelModel {
 public:
  // `db` may be null (model only); it must outlive the model. `gpu` must pass
  // validate_gpu_spec() (checked).
  KernelModel(GpuSpec gpu, const KernelDb* db);
  // Rounded up to a nanosecond; at least the GPU's launch floor. A measured
  // time is used as is (us -> ns, rounded up), floor or not.
  SimTime time(const Kernel& k) const;
  // Whether time(k) came from the database.
  bool measured(const Kernel& k) const;
  // The efficiency curves' time, ignoring the database.
  SimTime modeled(const Kernel& k) const;
  const GpuSpec& gpu() const { return gpu_; }

 private:
  double gemm_s(const Kernel& k) const;
  double attention_s(const Kernel& k) const;
  double memory_s(double bytes) const;

  GpuSpec gpu_;
  const KernelDb* db_;
};

}  // namespace prism
