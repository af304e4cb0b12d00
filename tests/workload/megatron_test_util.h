// Helpers shared by the Megatron builder tests: job specs from YAML text and
// graphs built with the H100 kernel model.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "compute/gpu_spec.h"
#include "compute/kernel_model.h"
#include "workload/job_yaml.h"
#include "workload/megatron.h"

namespace prism::testing {

inline JobSpec parse(const std::string& yaml) {
  Result<JobSpec> j = parse_job_yaml(yaml, "<test>");
  EXPECT_TRUE(j.is_ok()) << j.status().message() << "\n" << yaml;
  return j.is_ok() ? std::move(j).value() : JobSpec{};
}

inline const KernelModel& h100() {
  static const KernelModel km(gpu_spec("H100-SXM5-80GB").value(), nullptr);
  return km;
}

inline BuiltJob build(const JobSpec& job) {
  Result<BuiltJob> b = build_megatron(job, h100());
  EXPECT_TRUE(b.is_ok()) << b.status().message();
  return b.is_ok() ? std::move(b).value() : BuiltJob{};
}

// Memory-bound kernels of the graph whose signature starts with `prefix`
// ("mem cp_"): signature -> uses over its roles.
inline std::map<std::string, std::int64_t> kernel_uses(const BuiltJob& b,
                                                       const std::string& prefix) {
  std::map<std::string, std::int64_t> out;
  for (const KernelUse& k : b.kernels)
    if (k.signature.rfind(prefix, 0) == 0) out[k.signature] += k.count;
  return out;
}

// The cluster section: `gpus` H100s of the dgx-h100 preset.
inline std::string cluster(int gpus) {
  return "cluster: {preset: dgx-h100, num_gpus: " + std::to_string(gpus) + "}\n";
}

}  // namespace prism::testing
