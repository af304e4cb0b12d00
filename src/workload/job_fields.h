// The settable fields of a job spec's model, training, parallelism and
// software sections (docs/job-spec.md): each field's section and key, as
// Megatron names it, and how a YAML value is read into a JobSpec. Integers
// are range-checked when read; their relations by validate_job().
#pragma once

#include <functional>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "util/status.h"
#include "workload/job_spec.h"

namespace prism {

struct JobField {
  std::string_view section;
  std::string_view key;
  std::function<Status(const YAML::Node&, JobSpec*)> set;
};

// Every field, once.
const std::vector<JobField>& job_fields();

}  // namespace prism
