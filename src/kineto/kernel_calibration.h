// Kernel times from a profiled training step (in-situ calibration): the
// measured-kernel database (compute/kernel_db.h) filled from torch.profiler
// (Kineto) traces of a real step on the GPU instead of isolated
// microbenchmarks, so that the times carry what a step does to its kernels
// (sustained clocks, SMs held by concurrent NCCL kernels, caches shared
// with neighbours).
//
// Each GPU activity of a trace (kernels, memcpys, memsets; NCCL kernels
// aside) is attributed to the host operator that launched it: its "External
// id", or the one of the runtime call with its "correlation". The outermost
// op around that launcher with a kernel signature (kineto/op_kernel.h:
// GEMMs, attention, forward or backward) owns it; an op's time is the sum of
// the device time it launched, and a signature's time the median over its
// ops in the traces. What cannot be attributed is counted by op and reason.
// The GPU is the trace's own (deviceProperties) when it names one the
// database knows, else the one given. docs/kineto.md, "Kernel times from a
// trace", has the mapping, the limits and every rejection.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "util/status.h"

namespace prism {
namespace kineto {
struct ParsedTrace;
}

struct KernelCalibrationOptions {
  // The database GPU (a preset name) when the traces carry no
  // deviceProperties or a device without a preset; must agree with them.
  std::string gpu;
  // The date in the rows' source column, YYYY-MM-DD; empty: today (UTC).
  std::string date;
};

struct CalibratedKernel {
  std::string signature;
  std::int64_t median_ns = 0;  // rounded up to a whole nanosecond
  int count = 0;               // ops it was taken from
};

// Device activity that no signature took, for one "op: reason".
struct UnmappedOps {
  int ops = 0;
  int kernels = 0;
  std::int64_t device_ns = 0;
};

struct KernelCalibration {
  std::string gpu;                        // the database's GPU name
  std::string gpu_origin;                 // how it was chosen, for the summary
  std::string source;                     // the rows' source column: "kineto FILE DATE"
  std::vector<CalibratedKernel> kernels;  // sorted by signature
  int traces = 0;
  int device_activities = 0;  // kernels, memcpys and memsets, NCCL's aside
  int nccl_kernels = 0;
  std::int64_t device_ns = 0;
  int ops_matched = 0;  // op instances that gave a signature
  int activities_matched = 0;
  std::int64_t matched_ns = 0;
  std::map<std::string, UnmappedOps> unmapped;  // "op: reason"
};

// The calibration from traces given as (name, text); names appear in
// messages and, without their directories, in the source column.
Result<KernelCalibration> calibrate_kernels(
    const std::vector<std::pair<std::string, std::string>>& traces,
    const KernelCalibrationOptions& options);
// The same from files.
Result<KernelCalibration> calibrate_kernels_from_files(
    const std::vector<std::filesystem::path>& files, const KernelCalibrationOptions& options);
// The same from traces parsed already (kineto/trace_events.h), named by
// their sources.
Result<KernelCalibration> calibrate_parsed_kernels(
    const std::vector<const kineto::ParsedTrace*>& traces, const KernelCalibrationOptions& options);

// The kernel-db CSV (docs/compute.md): gpu,signature,us,source,count, one row
// per signature in signature order, `us` with three decimals (whole ns).
std::string kernel_db_csv(const KernelCalibration& c);

}  // namespace prism
