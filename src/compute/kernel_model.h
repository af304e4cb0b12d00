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

#include <cstdint>
#include <optional>
#include <string_view>

#include "compute/gpu_spec.h"
#include "compute/kernel.h"
#include "compute/kernel_db.h"
#include "util/units.h"

namespace prism {

// Where a kernel's time comes from: the database, the database's time of
// the same GEMM without `acc` scaled by the curves' ratio (an accumulating
// GEMM whose plain signature was measured), or the curves.
enum class KernelSource : std::uint8_t { kModel, kMeasured, kMeasuredPlainScaled };

// "model", "measured", "measured (plain) x model": the source column of
// `prism simulate --kernels`.
std::string_view to_string(KernelSource s);

class KernelModel {
 public:
  // `db` may be null (model only); it must outlive the model. `gpu` must pass
  // validate_gpu_spec() (checked).
  KernelModel(GpuSpec gpu, const KernelDb* db);
  // The kernel's time in a training step, rounded up to a nanosecond. A
  // measured time taken in a step (KernelDb::Row::in_situ) is used as is
  // (us -> ns), floor or not; another measured row times the GPU's sustained
  // slowdown for the kernel (sustained_slowdown()); otherwise the curves'
  // time with its kernel part (not the launch floor) so slowed. A GEMM with `acc` not in
  // the database whose plain signature (acc cleared) is: measured plain ns x
  // modeled(k) / modeled(plain), then as above.
  SimTime time(const Kernel& k) const;
  // GEMMs and attention: the GPU's tensor_sustained_slowdown (its FP8 one for
  // FP8 inputs on FP8 tensor cores); memory-bound kernels: 1.
  double sustained_slowdown(const Kernel& k) const;
  // Where time(k) comes from.
  KernelSource source(const Kernel& k) const;
  // Whether time(k) came from the database (directly or scaled from the
  // plain GEMM's measurement).
  bool measured(const Kernel& k) const { return source(k) != KernelSource::kModel; }
  // The efficiency curves' time, ignoring the database: a burst time, as
  // the database's rows are measured (no sustained slowdown).
  SimTime modeled(const Kernel& k) const;
  const GpuSpec& gpu() const { return gpu_; }
  const KernelDb* db() const { return db_; }

 private:
  // The database's time of k, or of its plain GEMM scaled (see time()).
  std::optional<double> measured_ns(const Kernel& k, KernelSource* source, bool* in_situ) const;
  // The curves' time with the kernel part (launch floor excluded) x slowdown.
  SimTime modeled_at(const Kernel& k, double slowdown) const;
  double gemm_s(const Kernel& k) const;
  double attention_s(const Kernel& k) const;
  double memory_s(double bytes) const;

  GpuSpec gpu_;
  const KernelDb* db_;
};

}  // namespace prism
