#include "simulation/what_if.h"

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
  return out;
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
