#include "slicing/role_split.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <utility>

#include <fmt/format.h>

namespace prism {
namespace {

struct Side {
  std::string name;
  std::string what;
};

// Adds the two-class candidate that `in_first` draws, unless a class is
// empty or an earlier candidate has the same classes. Classes are ordered by
// their lowest rank, so that sub-roles come in rank order.
void add_two(std::vector<RoleSplitRule>& out, const std::vector<Rank>& ranks, std::string rule,
             Side yes, Side no, const std::function<bool(Rank)>& in_first) {
  std::vector<Rank> a;
  std::vector<Rank> b;
  for (Rank r : ranks) (in_first(r) ? a : b).push_back(r);
  if (a.empty() || b.empty()) return;
  RoleSplitRule c{std::move(rule), {}, {}, {}};
  if (b.front() < a.front()) {
    std::swap(a, b);
    std::swap(yes, no);
  }
  c.names = {yes.name, no.name};
  c.what = {yes.what, no.what};
  c.classes = {std::move(a), std::move(b)};
  for (const RoleSplitRule& o : out) {
    if (o.classes == c.classes) return;
  }
  out.push_back(std::move(c));
}

// Whether the captured ranks of each class run one program: each against
// the class's lowest captured rank. On a difference, *why and *pair say
// where.
bool consistent(const std::vector<std::vector<Rank>>& classes, const std::set<Rank>& captured,
                const std::function<Status(Rank, Rank)>& same, Status* why,
                std::vector<Rank>* pair) {
  for (const std::vector<Rank>& c : classes) {
    Rank base = kNone;
    for (Rank r : c) {
      if (captured.count(r) == 0) continue;
      if (base == kNone) {
        base = r;
        continue;
      }
      Status s = same(base, r);
      if (!s.is_ok()) {
        if (why != nullptr) *why = std::move(s);
        if (pair != nullptr) *pair = {base, r};
        return false;
      }
    }
  }
  return true;
}

// The ranks that probe `c`'s classes: each class's first and last rank and
// its lowest real rank (the class's representative in the emulation).
std::set<Rank> probes(const RoleSplitRule& c, const std::vector<Rank>& real) {
  std::set<Rank> out;
  for (const std::vector<Rank>& cls : c.classes) {
    out.insert(cls.front());
    out.insert(cls.back());
    for (Rank r : real) {
      if (std::binary_search(cls.begin(), cls.end(), r)) {
        out.insert(r);
        break;
      }
    }
  }
  return out;
}

}  // namespace

std::vector<RoleSplitRule> split_candidates(const Layout& l, int fixed_dim,
                                            const std::vector<Rank>& ranks) {
  std::vector<RoleSplitRule> out;
  if (ranks.size() < 2) return out;
  const Rank first = ranks.front();
  const Rank last = ranks.back();
  add_two(out, ranks, "its first rank", {"first", "its first rank"},
          {"others", "its ranks but the first"}, [&](Rank r) { return r == first; });
  add_two(out, ranks, "its last rank", {"last", "its last rank"},
          {"others", "its ranks but the last"}, [&](Rank r) { return r == last; });
  for (std::size_t d = 0; d < l.dims().size(); ++d) {
    const int i = static_cast<int>(d);
    const GridDim& dim = l.dims()[d];
    if (i == fixed_dim || dim.size < 2) continue;
    const std::string& n = dim.name;
    add_two(out, ranks, fmt::format("{} rank 0", n),
            {fmt::format("{}0", n), fmt::format("its ranks at {} rank 0", n)},
            {fmt::format("{}-others", n), fmt::format("its ranks at {} rank > 0", n)},
            [&](Rank r) { return l.coord(r, i) == 0; });
    add_two(
        out, ranks, fmt::format("the last {} rank", n),
        {fmt::format("{}-last", n), fmt::format("its ranks at {} rank {}", n, dim.size - 1)},
        {fmt::format("{}-others", n), fmt::format("its ranks at {} rank < {}", n, dim.size - 1)},
        [&](Rank r) { return l.coord(r, i) == dim.size - 1; });
    add_two(out, ranks, fmt::format("even and odd {} ranks", n),
            {fmt::format("{}-even", n), fmt::format("its ranks at an even {} rank", n)},
            {fmt::format("{}-odd", n), fmt::format("its ranks at an odd {} rank", n)},
            [&](Rank r) { return l.coord(r, i) % 2 == 0; });
  }
  add_two(out, ranks, "even and odd ranks", {"even", "its even ranks"}, {"odd", "its odd ranks"},
          [](Rank r) { return r % 2 == 0; });
  return out;
}

RoleSplitRule set_apart(const RoleSplitRule& rule, const std::vector<Rank>& apart) {
  // Each class less the ranks set apart, then one class per rank set apart;
  // all in order of their lowest rank.
  std::vector<std::pair<std::vector<Rank>, std::pair<std::string, std::string>>> classes;
  for (std::size_t k = 0; k < rule.classes.size(); ++k) {
    std::vector<Rank> kept;
    for (Rank r : rule.classes[k]) {
      if (std::find(apart.begin(), apart.end(), r) == apart.end()) kept.push_back(r);
    }
    if (!kept.empty()) classes.push_back({std::move(kept), {rule.names[k], rule.what[k]}});
  }
  for (Rank r : apart)
    classes.push_back({{r}, {fmt::format("rank{}", r), fmt::format("its listed rank {}", r)}});
  std::sort(classes.begin(), classes.end(),
            [](const auto& a, const auto& b) { return a.first.front() < b.first.front(); });
  RoleSplitRule out;
  out.rule = rule.classes.size() <= 1
                 ? fmt::format("the listed {} {}", apart.size() == 1 ? "rank" : "ranks",
                               compact_ranks(apart))
                 : fmt::format("{}, and the listed {} {}", rule.rule,
                               apart.size() == 1 ? "rank" : "ranks", compact_ranks(apart));
  for (auto& [ranks, label] : classes) {
    out.classes.push_back(std::move(ranks));
    out.names.push_back(label.first.empty() ? "others" : label.first);
    out.what.push_back(label.second.empty() ? "its other ranks" : label.second);
  }
  return out;
}

RoleSplit split_role(const Layout& l, int fixed_dim, const std::vector<Rank>& ranks,
                     const std::vector<Rank>& captured, const std::vector<Rank>& real,
                     const std::vector<Rank>& listed, const SameProgram& same) {
  const std::set<Rank> have(captured.begin(), captured.end());
  std::map<std::pair<Rank, Rank>, Status> memo;
  const auto cached = [&](Rank a, Rank b) {
    auto it = memo.find({a, b});
    if (it == memo.end()) it = memo.emplace(std::make_pair(a, b), same(a, b)).first;
    return it->second;
  };
  RoleSplit out;
  if (consistent({ranks}, have, cached, &out.why, &out.differ)) return out;  // kOne

  std::vector<Rank> apart;
  for (Rank r : listed) {
    if (std::binary_search(ranks.begin(), ranks.end(), r)) apart.push_back(r);
  }
  std::sort(apart.begin(), apart.end());
  apart.erase(std::unique(apart.begin(), apart.end()), apart.end());

  std::vector<RoleSplitRule> tier = split_candidates(l, fixed_dim, ranks);
  for (int t = 0; t < 2; ++t) {
    if (t == 1) {  // none fits: the listed ranks apart, each a class of its own
      if (apart.empty()) break;
      std::vector<RoleSplitRule> base = tier;
      base.insert(base.begin(), RoleSplitRule{"", {""}, {""}, {ranks}});
      tier.clear();
      for (const RoleSplitRule& c : base) {
        RoleSplitRule a = set_apart(c, apart);
        if (std::none_of(tier.begin(), tier.end(),
                         [&](const RoleSplitRule& o) { return o.classes == a.classes; }))
          tier.push_back(std::move(a));
      }
      std::stable_sort(tier.begin(), tier.end(), [](const auto& a, const auto& b) {
        return a.classes.size() < b.classes.size();
      });
    }
    std::vector<const RoleSplitRule*> live;
    for (const RoleSplitRule& c : tier) {
      out.tried.push_back(c.rule);
      if (consistent(c.classes, have, cached, nullptr, nullptr)) live.push_back(&c);
    }
    std::set<Rank> missing;
    for (const RoleSplitRule* c : live) {
      for (Rank r : probes(*c, real)) {
        if (have.count(r) == 0) missing.insert(r);
      }
    }
    if (!missing.empty()) {
      out.kind = RoleSplit::Kind::kCapture;
      out.capture.assign(missing.begin(), missing.end());
      return out;
    }
    if (!live.empty()) {
      out.kind = RoleSplit::Kind::kSplit;
      out.rule = *live.front();
      return out;
    }
  }
  out.kind = RoleSplit::Kind::kNone;
  return out;
}

std::string compact_ranks(const std::vector<Rank>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ',';
    if (j - i >= 2) {
      out += fmt::format("{}-{}", ranks[i], ranks[j]);
    } else {
      for (std::size_t k = i; k <= j; ++k) out += fmt::format("{}{}", k == i ? "" : ",", ranks[k]);
    }
    i = j + 1;
  }
  return out;
}

}  // namespace prism
