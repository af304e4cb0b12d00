#include "simulation/what_if.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <system_error>

#include <fmt/format.h>

#include "graph/rank_list.h"
#include "util/units.h"

namespace prism {
namespace {

// The largest straggler factor: graph overrides scale compute by at most
// kMaxComputeScalePpm (x1000).
constexpr double kMaxFactor = static_cast<double>(kMaxComputeScalePpm) / 1e6;

// `text` as a whole finite number, or nothing.
std::optional<double> parse_number(std::string_view text) {
  double v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(v))
    return std::nullopt;
  return v;
}

}  // namespace

std::string WhatIf::describe() const {
  std::string out;
  for (const Straggler& s : stragglers) {
    if (!out.empty()) out += ' ';
    out += fmt::format("--straggler {}:{}", format_rank_list(s.ranks), s.factor);
  }
  if (jitter) {
    if (!out.empty()) out += ' ';
    out += fmt::format("--jitter {}:{}", jitter->pct, jitter->seed);
  }
  for (const LinkDegradation& d : links) {
    if (!out.empty()) out += ' ';
    out += prism::describe(d);
  }
  if (failure) {
    if (!out.empty()) out += ' ';
    out += prism::describe(*failure);
  }
  return out;
}

std::string format_duration(SimTime t) {
  static constexpr std::pair<std::int64_t, std::string_view> kUnits[] = {
      {60'000'000'000, "min"}, {1'000'000'000, "s"}, {1'000'000, "ms"}, {1'000, "us"}};
  for (const auto& [ns, unit] : kUnits)
    if (t.ns != 0 && t.ns % ns == 0) return fmt::format("{}{}", t.ns / ns, unit);
  return fmt::format("{}ns", t.ns);
}

std::string describe(const NodeFailure& f) {
  return fmt::format("--fail-node {}@{}", f.node, format_duration(f.at));
}

Result<SimTime> parse_duration(std::string_view text) {
  static constexpr std::pair<std::string_view, double> kUnits[] = {
      {"min", 60e9}, {"ms", 1e6}, {"us", 1e3}, {"ns", 1}, {"s", 1e9}};
  std::string_view number = text;
  double scale = 1;
  for (const auto& [unit, ns] : kUnits) {
    if (text.size() > unit.size() && text.ends_with(unit)) {
      number = text.substr(0, text.size() - unit.size());
      scale = ns;
      break;
    }
  }
  const std::optional<double> v = parse_number(number);
  const bool bare = number.size() == text.size();
  if (!v || (bare && *v != std::floor(*v)))
    return Status::invalid_argument(fmt::format(
        "\"{}\" is not a duration (a number with ns, us, ms, s or min, or integer nanoseconds)",
        text));
  const double ns = *v * scale;
  if (ns < 0 || ns > static_cast<double>(kTimeHorizon.ns))
    return Status::invalid_argument(
        fmt::format("\"{}\" is outside [0, {} s]", text, kTimeHorizon.ns / 1'000'000'000));
  return SimTime{std::llround(ns)};
}

Result<NodeFailure> parse_fail_node(std::string_view text) {
  const auto fail = [&](const std::string& why) {
    return Status::invalid_argument(fmt::format("--fail-node {}: {}", text, why));
  };
  const std::size_t at = text.find('@');
  if (at == std::string_view::npos) return fail("expected N@TIME, e.g. 1@1.5s or 3@200ms");
  NodeFailure f;
  const std::string_view node = text.substr(0, at);
  const auto [ptr, ec] = std::from_chars(node.data(), node.data() + node.size(), f.node);
  if (node.empty() || ec != std::errc() || ptr != node.data() + node.size() || f.node < 0)
    return fail(fmt::format("the node \"{}\" is not an index (an integer >= 0)", node));
  Result<SimTime> t = parse_duration(text.substr(at + 1));
  if (!t.is_ok()) return fail(t.status().message());
  f.at = t.value();
  return f;
}

Result<SimTime> parse_nccl_timeout(std::string_view text) {
  Result<SimTime> t = parse_duration(text);
  if (!t.is_ok() || t.value().ns <= 0)
    return Status::invalid_argument(
        fmt::format("--nccl-timeout {}: {}", text,
                    t.is_ok() ? std::string("must be > 0") : t.status().message()));
  return t;
}

std::string describe(const LinkDegradation& d) {
  return fmt::format("--link-degrade {}:{}:{}", to_string(d.part), d.index, d.factor);
}

Result<LinkDegradation> parse_link_degrade(std::string_view text) {
  const auto fail = [&](const std::string& why) {
    return Status::invalid_argument(fmt::format("--link-degrade {}: {}", text, why));
  };
  const std::size_t last = text.rfind(':');
  const std::size_t first = text.find(':');
  if (last == std::string_view::npos || first == last)
    return fail(
        "expected WHAT:FACTOR with WHAT one of node:N, rail:R, leaf:L, nvlink:N, e.g. "
        "node:1:2");
  LinkDegradation d;
  const std::string_view kind = text.substr(0, first);
  const auto& names = link_part_names();
  const auto it = std::find(names.begin(), names.end(), kind);
  if (it == names.end())
    return fail(fmt::format("unknown part \"{}\": expected node, rail, leaf or nvlink", kind));
  d.part = static_cast<LinkDegradation::Part>(it - names.begin());
  const std::string_view index = text.substr(first + 1, last - first - 1);
  const auto [ptr, ec] = std::from_chars(index.data(), index.data() + index.size(), d.index);
  if (index.empty() || ec != std::errc() || ptr != index.data() + index.size() || d.index < 0)
    return fail(fmt::format("the {} \"{}\" is not an index (an integer >= 0)", kind, index));
  const std::optional<double> factor = parse_number(text.substr(last + 1));
  if (!factor) return fail(fmt::format("the factor \"{}\" is not a number", text.substr(last + 1)));
  if (*factor < 1 || *factor > kMaxFactor)
    return fail(fmt::format(
        "the factor must be at least 1 (the bandwidth is divided by it) and at most {} (got {})",
        kMaxFactor, *factor));
  d.factor = *factor;
  return d;
}

Status check_link_degradations(const std::vector<LinkDegradation>& links, const ClusterSpec& c) {
  for (const LinkDegradation& d : links) {
    const int n = num_link_parts(c, d.part);
    if (d.index < n) continue;
    if (n == 0)
      return Status::invalid_argument(
          fmt::format("{}: the cluster {} has no leaf switches (its fabric is a single switch)",
                      describe(d), c.name));
    const std::string_view kind = to_string(d.part);
    const char* plural = d.part == LinkDegradation::Part::kRail   ? "rails"
                         : d.part == LinkDegradation::Part::kLeaf ? "leaves"
                                                                  : "nodes";
    return Status::invalid_argument(
        fmt::format("{}: {} {} does not exist: the cluster {} has {} {}", describe(d), kind,
                    d.index, c.name, plural, n == 1 ? "0" : fmt::format("0-{}", n - 1)));
  }
  return Status::ok();
}

std::vector<std::int64_t> link_fold_tags(const ClusterSpec& c, int world_size,
                                         const std::vector<LinkDegradation>& links) {
  std::vector<std::int64_t> tags(world_size, 0);
  std::vector<RankSlowdown> seen{RankSlowdown{}};  // tag = index; 0: not slowed
  for (Rank r = 0; r < world_size; ++r) {
    const RankSlowdown s = rank_slowdown(c, links, r);
    auto it = std::find(seen.begin(), seen.end(), s);
    if (it == seen.end()) it = seen.insert(seen.end(), s);
    tags[r] = it - seen.begin();
  }
  return tags;
}

Result<Straggler> parse_straggler(std::string_view text, int world_size) {
  const auto fail = [&](const std::string& why) {
    return Status::invalid_argument(fmt::format("--straggler {}: {}", text, why));
  };
  const std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return fail("expected RANKS:FACTOR, e.g. 5:1.5 or 0,4-7:2");
  Straggler s;
  const std::optional<double> factor = parse_number(text.substr(colon + 1));
  if (!factor)
    return fail(fmt::format("the factor \"{}\" is not a number", text.substr(colon + 1)));
  if (*factor <= 0 || *factor > kMaxFactor)
    return fail(fmt::format("the factor must be > 0 and at most {} (got {})", kMaxFactor, *factor));
  s.factor = *factor;
  Result<std::vector<Rank>> ranks = parse_rank_list(text.substr(0, colon), world_size);
  if (!ranks.is_ok()) return fail(ranks.status().message());
  s.ranks = std::move(ranks).value();
  return s;
}

Result<Jitter> parse_jitter(std::string_view text) {
  const auto fail = [&](const std::string& why) {
    return Status::invalid_argument(fmt::format("--jitter {}: {}", text, why));
  };
  Jitter j;
  const std::size_t colon = text.find(':');
  const std::string_view pct = text.substr(0, colon);
  const std::optional<double> v = parse_number(pct);
  if (!v)
    return fail(fmt::format("\"{}\" is not a percentage (expected PCT[:SEED], e.g. 5:42)", pct));
  if (*v < 0 || *v >= 100) return fail(fmt::format("PCT must be in [0, 100) (got {})", *v));
  j.pct = *v;
  if (colon != std::string_view::npos) {
    const std::string_view seed = text.substr(colon + 1);
    const auto [ptr, ec] = std::from_chars(seed.data(), seed.data() + seed.size(), j.seed);
    if (seed.empty() || ec != std::errc() || ptr != seed.data() + seed.size())
      return fail(fmt::format("the seed \"{}\" is not an integer in [0, 2^64)", seed));
  }
  return j;
}

Result<ExecutionGraph> apply_stragglers(const ExecutionGraph& g,
                                        const std::vector<Straggler>& stragglers) {
  ExecutionGraph out = g;
  std::map<Rank, double> scale;  // ascending: overrides stay sorted by rank
  for (const RankOverride& o : g.overrides)
    scale[o.rank] = static_cast<double>(o.compute_scale_ppm);
  for (const Straggler& s : stragglers)
    for (Rank r : s.ranks) {
      auto [it, fresh] = scale.try_emplace(r, 1e6);
      it->second *= s.factor;
    }
  out.overrides.clear();
  for (const auto& [rank, ppm] : scale) {
    const std::int64_t rounded = std::llround(ppm);
    if (rounded <= 0 || rounded > kMaxComputeScalePpm)
      return Status::invalid_argument(fmt::format(
          "--straggler: rank {} would compute {} times as long (with the graph's own scale): "
          "must be > 0 and at most {}",
          rank, ppm / 1e6, kMaxFactor));
    out.overrides.push_back(RankOverride{rank, rounded});
  }
  return out;
}

std::int64_t jitter_ppm(const Jitter& j) {
  return std::llround(j.pct * 1e4);
}

}  // namespace prism
