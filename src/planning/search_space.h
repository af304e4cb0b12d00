// The search space of `prism search`: the values each axis of a Megatron job
// may take (tp, pp, vpp, cp, ep, micro-batch size, recompute, distributed
// optimizer, overlaps, sequence parallelism), as the user lists them or as
// defaults derived from the job, and its enumeration into the configurations
// Megatron would accept (validate_job(), workload/job_spec.h, is the one
// rule book; a rejected configuration keeps its reason).
//
// The world size and the global batch stay the job's: every configuration
// trains the same batch on the same GPUs, so tokens/s per GPU compares them.
// Enumeration order is fixed (tp, pp, vpp, cp, ep, mbs, recompute,
// distributed optimizer, overlap_grad_reduce, sequence parallelism,
// overlap_param_gather; the last varies fastest; each axis's values
// ascending, off before on), so every output that follows it is
// deterministic.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"
#include "workload/job_spec.h"

namespace prism {

// "1,2,4", "1-16" (every integer of the range), or both: "1,4-8". Values
// are sorted and deduplicated. Errors name `option` ("--tp: ...").
Result<std::vector<int>> parse_int_list(std::string_view text, std::string_view option);
// "on,off" (also true/false); off sorts first.
Result<std::vector<bool>> parse_switch_list(std::string_view text, std::string_view option);
// "none,selective,full", in that order whatever the text's.
Result<std::vector<Recompute>> parse_recompute_list(std::string_view text, std::string_view option);

// The lists as the user gave them (the command line's text); an unset one
// takes its default (search_axes()).
struct SearchAxesText {
  std::optional<std::string> tp, pp, vpp, cp, ep, mbs, recompute, distributed_optimizer,
      overlap_grad_reduce, overlap_param_gather, sequence_parallel;
};

struct SearchAxes {
  std::vector<int> tp, pp, vpp, cp, ep, mbs;
  std::vector<Recompute> recompute;
  std::vector<bool> distributed_optimizer, overlap_grad_reduce, sequence_parallel;
  // Empty: the job's overlap_param_gather where the distributed optimizer is
  // on, off where it is off (Megatron refuses it without one).
  std::vector<bool> overlap_param_gather;
};

// The axes of `text` over `job` (a validated job). Defaults:
//   tp   powers of two up to the GPUs of a node, and the job's
//   pp   every integer from 1 to min(layers, GPUs)
//   vpp  1-8, and the job's          cp   1, 2, 4, 8, and the job's
//   ep   an MoE model: the powers of two dividing its experts, and the
//        job's; a dense model: 1
//   mbs  1, 2, 4, and the job's      recompute  none, selective, full
//   distributed optimizer, overlap_grad_reduce: the job's
//   sequence parallelism: on (it is off wherever tp is 1)
Result<SearchAxes> search_axes(const SearchAxesText& text, const JobSpec& job);

// One point of the space: the fields of a JobSpec that search varies.
struct SearchConfig {
  int tp = 1, pp = 1, vpp = 1, cp = 1, ep = 1, mbs = 1;
  Recompute recompute = Recompute::kNone;
  bool distributed_optimizer = false, overlap_grad_reduce = false, overlap_param_gather = false;
  bool sequence_parallel = false;  // always false at tp 1

  bool operator==(const SearchConfig&) const = default;
};

// `base` with `c`'s fields, Megatron's defaults applied (apply_job_defaults);
// global batch and world size stay the base's.
JobSpec apply_config(const JobSpec& base, const SearchConfig& c);
// The configuration `job` runs.
SearchConfig config_of(const JobSpec& job);
// "tp=8 sp pp=4 vpp=5 cp=1 ep=1 mbs=1 recompute=none dist-opt=on overlap=grad+param"
std::string to_string(const SearchConfig& c);

struct RejectedConfig {
  SearchConfig config;
  std::string reason;  // validate_job()'s message
};

struct SearchSpace {
  std::int64_t combinations = 0;         // distinct points of the axes' product
  std::vector<SearchConfig> valid;       // in enumeration order
  std::vector<RejectedConfig> rejected;  // in enumeration order
};

// Every point of `axes` over `base`, checked by validate_job(). An empty
// result is an error naming the option at fault: the first axis none of
// whose values `base` accepts with the others left as they are ("--tp 3:
// model.num_attention_heads: 32 is not divisible by ..."), else the first
// rejection's reason.
Result<SearchSpace> enumerate_space(const SearchAxes& axes, const JobSpec& base);

}  // namespace prism
