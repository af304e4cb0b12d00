// Job specs in YAML (format in docs/job-spec.md):
//
//   name: llama3-70b-h100
//   model: {preset: llama3.1-70b}            # or every field by name
//   training: {seq_length: 8192, micro_batch_size: 1, global_batch_size: 128,
//              precision: bf16, recompute: none, use_distributed_optimizer: true,
//              overlap_grad_reduce: true, overlap_param_gather: true}
//   parallelism: {tensor_model_parallel_size: 4, pipeline_model_parallel_size: 4,
//                 virtual_pipeline_model_parallel_size: 5, context_parallel_size: 2,
//                 sequence_parallel: true}
//   cluster: {preset: dgx-h100, num_gpus: 64}  # or a preset name, or a cluster YAML path
//
// `overrides` are "section.key=value" strings (the command line's --set),
// applied to the document before it is read, so they are checked exactly like
// the file: `--set parallelism.tensor_model_parallel_size=8`,
// `--set model.preset=llama2-7b`, `--set cluster.num_gpus=1024`.
//
// A cluster path is relative to the job file's directory; when `cluster:` is a
// preset name or a path, `--set cluster.*` applies to that preset's or file's
// settings. The cluster must be sized (num_gpus or num_nodes).
//
// Unknown sections and fields, wrong types and invalid values are rejected
// with "FILE:LINE:COL: section.field: reason" (an override is named
// "--set section.key=value" instead); impossible combinations with
// validate_job()'s reason.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"
#include "workload/job_spec.h"

namespace prism {

Result<JobSpec> parse_job_yaml(std::string_view text, std::string_view source,
                               const std::vector<std::string>& overrides = {});
Result<JobSpec> load_job_yaml(const std::string& path,
                              const std::vector<std::string>& overrides = {});

}  // namespace prism
