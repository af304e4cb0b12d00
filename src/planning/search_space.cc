#include "planning/search_space.h"

#include <algorithm>
#include <charconv>
#include <functional>
#include <set>
#include <tuple>

#include <fmt/format.h>

namespace prism {
namespace {

// Past these a list is surely a typo, and the product would not finish.
constexpr std::int64_t kMaxValue = std::int64_t{1} << 22;  // validate_job()'s GPU bound
constexpr std::int64_t kMaxCombinations = 10'000'000;

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = text.find(sep, start);
    parts.push_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

Result<std::int64_t> parse_positive(std::string_view s, std::string_view option) {
  std::int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || v < 1)
    return Status::invalid_argument(
        fmt::format("{}: '{}' is not a positive integer (lists read 1,2,4 or 1-16)", option, s));
  if (v > kMaxValue)
    return Status::invalid_argument(fmt::format("{}: {} is above {}", option, v, kMaxValue));
  return v;
}

Status empty_item(std::string_view text, std::string_view option) {
  return Status::invalid_argument(
      fmt::format("{}: '{}' has an empty item (lists read 1,2,4 or 1-16)", option, text));
}

template <typename T>
std::vector<T> sorted_unique(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

std::vector<int> with(std::vector<int> v, int job_value) {
  v.push_back(job_value);
  return sorted_unique(std::move(v));
}

std::vector<int> powers_of_two_up_to(int n) {
  std::vector<int> v;
  for (int p = 1; p <= n; p *= 2) v.push_back(p);
  return v;
}

// One axis of the product: its option, and how its i-th value sets a config.
struct Axis {
  std::string_view option;
  std::size_t size;
  std::function<void(SearchConfig&, std::size_t)> set;
  std::function<std::string(std::size_t)> value;  // as the option reads it
};

std::string_view on_off(bool b) {
  return b ? "on" : "off";
}

std::vector<Axis> axes_of(const SearchAxes& a, bool param_gather_of_job) {
  auto ints = [](std::string_view option, const std::vector<int>& v, int SearchConfig::*field) {
    return Axis{option, v.size(), [&v, field](SearchConfig& c, std::size_t i) { c.*field = v[i]; },
                [&v](std::size_t i) { return std::to_string(v[i]); }};
  };
  auto switches = [](std::string_view option, const std::vector<bool>& v,
                     bool SearchConfig::*field) {
    return Axis{option, v.size(), [&v, field](SearchConfig& c, std::size_t i) { c.*field = v[i]; },
                [&v](std::size_t i) { return std::string(on_off(v[i])); }};
  };
  std::vector<Axis> axes = {
      ints("--tp", a.tp, &SearchConfig::tp),
      ints("--pp", a.pp, &SearchConfig::pp),
      ints("--vpp", a.vpp, &SearchConfig::vpp),
      ints("--cp", a.cp, &SearchConfig::cp),
      ints("--ep", a.ep, &SearchConfig::ep),
      ints("--mbs", a.mbs, &SearchConfig::mbs),
      Axis{"--recompute", a.recompute.size(),
           [&a](SearchConfig& c, std::size_t i) { c.recompute = a.recompute[i]; },
           [&a](std::size_t i) { return std::string(to_string(a.recompute[i])); }},
      switches("--distributed-optimizer", a.distributed_optimizer,
               &SearchConfig::distributed_optimizer),
      switches("--overlap-grad-reduce", a.overlap_grad_reduce, &SearchConfig::overlap_grad_reduce),
      switches("--sequence-parallel", a.sequence_parallel, &SearchConfig::sequence_parallel),
  };
  if (!a.overlap_param_gather.empty()) {
    axes.push_back(switches("--overlap-param-gather", a.overlap_param_gather,
                            &SearchConfig::overlap_param_gather));
  } else {
    // Follows the distributed optimizer (set before it: axes apply in order).
    axes.push_back(Axis{"--overlap-param-gather", 1,
                        [param_gather_of_job](SearchConfig& c, std::size_t) {
                          c.overlap_param_gather = param_gather_of_job && c.distributed_optimizer;
                        },
                        [](std::size_t) { return std::string("(the job's)"); }});
  }
  return axes;
}

std::string list_text(const Axis& axis) {
  std::string out;
  for (std::size_t i = 0; i < axis.size; ++i) {
    if (i > 0) out += ',';
    out += axis.value(i);
  }
  return out;
}

auto key(const SearchConfig& c) {
  return std::tuple(c.tp, c.pp, c.vpp, c.cp, c.ep, c.mbs, c.recompute, c.distributed_optimizer,
                    c.overlap_grad_reduce, c.overlap_param_gather, c.sequence_parallel);
}

// At tp 1 Megatron turns sequence parallelism off: one configuration.
SearchConfig normalized(SearchConfig c) {
  if (c.tp == 1) c.sequence_parallel = false;
  return c;
}

// The first axis none of whose values `base` accepts when only that axis
// changes, as an error; ok when every axis has one.
Status axis_at_fault(const std::vector<Axis>& axes, const JobSpec& base) {
  const SearchConfig job = config_of(base);
  for (const Axis& axis : axes) {
    std::string first_reason;
    bool any = false;
    for (std::size_t i = 0; i < axis.size && !any; ++i) {
      SearchConfig c = job;
      axis.set(c, i);
      const Status s = validate_job(apply_config(base, normalized(c)));
      if (s.is_ok())
        any = true;
      else if (first_reason.empty())
        first_reason = fmt::format("{} {}: {}", axis.option, axis.value(i), s.message());
    }
    if (!any)
      return Status::invalid_argument(
          axis.size == 1 ? first_reason
                         : fmt::format("{} {}: no value gives a valid configuration of this job "
                                       "({})",
                                       axis.option, list_text(axis), first_reason));
  }
  return Status::ok();
}

}  // namespace

Result<std::vector<int>> parse_int_list(std::string_view text, std::string_view option) {
  std::vector<int> out;
  for (std::string_view item : split(text, ',')) {
    if (item.empty()) return empty_item(text, option);
    const std::size_t dash = item.find('-');
    if (dash == std::string_view::npos) {
      PRISM_ASSIGN_OR_RETURN(const std::int64_t v, parse_positive(item, option));
      out.push_back(static_cast<int>(v));
      continue;
    }
    PRISM_ASSIGN_OR_RETURN(const std::int64_t lo, parse_positive(item.substr(0, dash), option));
    PRISM_ASSIGN_OR_RETURN(const std::int64_t hi, parse_positive(item.substr(dash + 1), option));
    if (hi < lo)
      return Status::invalid_argument(
          fmt::format("{}: range '{}' runs backwards ({} > {})", option, item, lo, hi));
    for (std::int64_t v = lo; v <= hi; ++v) out.push_back(static_cast<int>(v));
  }
  return sorted_unique(std::move(out));
}

Result<std::vector<bool>> parse_switch_list(std::string_view text, std::string_view option) {
  std::vector<bool> out;
  for (std::string_view item : split(text, ',')) {
    if (item.empty()) return empty_item(text, option);
    if (item == "on" || item == "true")
      out.push_back(true);
    else if (item == "off" || item == "false")
      out.push_back(false);
    else
      return Status::invalid_argument(
          fmt::format("{}: '{}' is neither on nor off (lists read on,off)", option, item));
  }
  return sorted_unique(std::move(out));
}

Result<std::vector<Recompute>> parse_recompute_list(std::string_view text,
                                                    std::string_view option) {
  std::vector<Recompute> out;
  for (std::string_view item : split(text, ',')) {
    if (item.empty()) return empty_item(text, option);
    if (item == "none")
      out.push_back(Recompute::kNone);
    else if (item == "selective")
      out.push_back(Recompute::kSelective);
    else if (item == "full")
      out.push_back(Recompute::kFull);
    else
      return Status::invalid_argument(fmt::format(
          "{}: '{}' is not a recompute granularity (none, selective, full)", option, item));
  }
  return sorted_unique(std::move(out));
}

Result<SearchAxes> search_axes(const SearchAxesText& t, const JobSpec& job) {
  SearchAxes a;
  // An option's list, parsed, or its fallback when it was not given.
  auto list = [](auto parse, const std::optional<std::string>& text, std::string_view option,
                 auto fallback, auto* out) -> Status {
    if (!text) {
      *out = std::move(fallback);
      return Status::ok();
    }
    PRISM_ASSIGN_OR_RETURN(*out, parse(*text, option));
    return Status::ok();
  };
  auto ints = [&](const std::optional<std::string>& text, std::string_view option,
                  std::vector<int> fallback, std::vector<int>* out) {
    return list(parse_int_list, text, option, std::move(fallback), out);
  };
  auto switches = [&](const std::optional<std::string>& text, std::string_view option,
                      std::vector<bool> fallback, std::vector<bool>* out) {
    return list(parse_switch_list, text, option, std::move(fallback), out);
  };
  std::vector<int> pp;
  for (int v = 1; v <= std::min(job.model.num_layers, job.num_gpus); ++v) pp.push_back(v);
  std::vector<int> ep{1};
  if (job.model.is_moe()) {
    ep.clear();
    for (int v : powers_of_two_up_to(job.model.num_moe_experts))
      if (job.model.num_moe_experts % v == 0) ep.push_back(v);
  }
  PRISM_RETURN_IF_ERROR(
      ints(t.tp, "--tp", with(powers_of_two_up_to(job.cluster.gpus_per_node), job.tp()), &a.tp));
  PRISM_RETURN_IF_ERROR(ints(t.pp, "--pp", with(pp, job.pp()), &a.pp));
  PRISM_RETURN_IF_ERROR(ints(t.vpp, "--vpp", with({1, 2, 3, 4, 5, 6, 7, 8}, job.vpp()), &a.vpp));
  PRISM_RETURN_IF_ERROR(ints(t.cp, "--cp", with({1, 2, 4, 8}, job.cp()), &a.cp));
  PRISM_RETURN_IF_ERROR(ints(t.ep, "--ep", with(ep, job.ep()), &a.ep));
  PRISM_RETURN_IF_ERROR(
      ints(t.mbs, "--mbs", with({1, 2, 4}, job.training.micro_batch_size), &a.mbs));
  if (t.recompute) {
    PRISM_ASSIGN_OR_RETURN(a.recompute, parse_recompute_list(*t.recompute, "--recompute"));
  } else {
    a.recompute = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  }
  PRISM_RETURN_IF_ERROR(switches(t.distributed_optimizer, "--distributed-optimizer",
                                 {job.training.use_distributed_optimizer},
                                 &a.distributed_optimizer));
  PRISM_RETURN_IF_ERROR(switches(t.overlap_grad_reduce, "--overlap-grad-reduce",
                                 {job.training.overlap_grad_reduce}, &a.overlap_grad_reduce));
  PRISM_RETURN_IF_ERROR(
      switches(t.sequence_parallel, "--sequence-parallel", {true}, &a.sequence_parallel));
  if (t.overlap_param_gather) {
    PRISM_ASSIGN_OR_RETURN(a.overlap_param_gather,
                           parse_switch_list(*t.overlap_param_gather, "--overlap-param-gather"));
  }
  return a;
}

JobSpec apply_config(const JobSpec& base, const SearchConfig& c) {
  JobSpec j = base;
  ParallelSpec& p = j.parallelism;
  p.tensor_model_parallel_size = c.tp;
  p.pipeline_model_parallel_size = c.pp;
  p.virtual_pipeline_model_parallel_size = c.vpp;
  p.num_layers_per_virtual_pipeline_stage = 0;  // the chunks are the config's vpp
  p.context_parallel_size = c.cp;
  p.expert_model_parallel_size = c.ep;
  p.sequence_parallel = c.sequence_parallel;
  TrainingSpec& t = j.training;
  t.micro_batch_size = c.mbs;
  t.recompute = c.recompute;
  if (c.recompute != base.training.recompute) {
    // The job's method belongs to its own recompute: a searched one starts
    // from Megatron's (uniform, one layer).
    t.recompute_method = RecomputeMethod::kUnset;
    t.recompute_num_layers = 0;
  }
  t.use_distributed_optimizer = c.distributed_optimizer;
  t.overlap_grad_reduce = c.overlap_grad_reduce;
  t.overlap_param_gather = c.overlap_param_gather;
  apply_job_defaults(&j);  // the base's global batch is set: it stays
  return j;
}

SearchConfig config_of(const JobSpec& j) {
  SearchConfig c;
  c.tp = j.tp();
  c.pp = j.pp();
  c.vpp = j.vpp();
  c.cp = j.cp();
  c.ep = j.ep();
  c.mbs = j.training.micro_batch_size;
  c.recompute = j.training.recompute;
  c.distributed_optimizer = j.training.use_distributed_optimizer;
  c.overlap_grad_reduce = j.training.overlap_grad_reduce;
  c.overlap_param_gather = j.training.overlap_param_gather;
  c.sequence_parallel = j.parallelism.sequence_parallel && j.tp() > 1;
  return c;
}

std::string to_string(const SearchConfig& c) {
  const std::string overlap = c.overlap_grad_reduce && c.overlap_param_gather ? "grad+param"
                              : c.overlap_grad_reduce                         ? "grad"
                              : c.overlap_param_gather                        ? "param"
                                                                              : "none";
  return fmt::format("tp={}{} pp={} vpp={} cp={} ep={} mbs={} recompute={} dist-opt={} overlap={}",
                     c.tp, c.sequence_parallel ? " sp" : "", c.pp, c.vpp, c.cp, c.ep, c.mbs,
                     to_string(c.recompute), on_off(c.distributed_optimizer), overlap);
}

Result<SearchSpace> enumerate_space(const SearchAxes& axes, const JobSpec& base) {
  const std::vector<Axis> list = axes_of(axes, base.training.overlap_param_gather);
  std::int64_t product = 1;
  for (const Axis& a : list) {
    product *= static_cast<std::int64_t>(a.size);
    if (product > kMaxCombinations)
      return Status::invalid_argument(fmt::format(
          "the search space has more than {} combinations; narrow the lists (--tp, --pp, ...)",
          kMaxCombinations));
  }
  SearchSpace space;
  std::set<decltype(key(SearchConfig{}))> seen;
  std::vector<std::size_t> index(list.size(), 0);
  for (std::int64_t n = 0; n < product; ++n) {
    SearchConfig c;
    for (std::size_t a = 0; a < list.size(); ++a) list[a].set(c, index[a]);
    c = normalized(c);
    if (seen.insert(key(c)).second) {
      const Status s = validate_job(apply_config(base, c));
      if (s.is_ok())
        space.valid.push_back(c);
      else
        space.rejected.push_back(RejectedConfig{c, s.message()});
    }
    for (std::size_t a = list.size(); a-- > 0;) {  // the last axis varies fastest
      if (++index[a] < list[a].size) break;
      index[a] = 0;
    }
  }
  space.combinations = static_cast<std::int64_t>(seen.size());
  if (!space.valid.empty()) return space;
  PRISM_RETURN_IF_ERROR(axis_at_fault(list, base));
  return Status::invalid_argument(fmt::format(
      "the search space has no valid configuration: all {} combinations are rejected (the first, "
      "{}: {})",
      space.combinations, to_string(space.rejected.front().config), space.rejected.front().reason));
}

}  // namespace prism
