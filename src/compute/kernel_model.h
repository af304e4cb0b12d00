// KernelModel: time of a Kernel on one GPU. A measured-kernel database
// (compute/kernel_db.h) answers where it has the kernel's signature;
// otherwise efficiency curves over the GPU's peaks (compute/gpu_spec.h) do:
// GEMMs by their shape (wave quantization over the SMs, small-dimension
// penalty), flash attention by its shape, memory-bound kernels by their
// traffic at the achievable HBM bandwidth. One set of curve constants per GPU
// type (docs/compute.md gives them and their calibration).
#pragma once

#include "compute/gpu_spec.h"
#include "compute/kernel.h"
#include "compute/kernel_db.h"
#include "util/units.h"

namespace prism {

class KernelModel {
 public:
  // `db` may be null (model only); it must outlive the model.
  KernelModel(GpuSpec gpu, const KernelDb* db);
  // Rounded up to a nanosecond; at least the GPU's launch floor.
  SimTime time(const Kernel& k) const;
  // Whether time(k) came from the database.
  bool measured(const Kernel& k) const;
  const GpuSpec& gpu() const { return gpu_; }

 private:
  GpuSpec gpu_;
  const KernelDb* db_;
};

}  // namespace prism
