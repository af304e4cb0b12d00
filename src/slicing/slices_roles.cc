// find_roles() (slicing/slices.h): the roles of a program's job as its
// captures show them, each layout role split where its captured ranks
// differ (slicing/role_split.h).
#include "slicing/slices.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "slicing/role_split.h"
#include "slicing/slices_grid.h"

namespace prism {

using slices_internal::anchor;
using slices_internal::check_same_program;

namespace {

// find_roles(), one layout role at a time.
class RoleFinder {
 public:
  RoleFinder(const JobSpec& job, const SliceRoles& base, const std::vector<RankProgram>& captures,
             const RoleHints& hints)
      : job_(job), base_(base), hints_(hints) {
    const int world = base.layout.world_size();
    for (const RankProgram& p : captures) {  // the first of each rank (sort() refuses more)
      if (p.rank >= 0 && p.rank < world) by_rank_.try_emplace(p.rank, &p);
    }
    out_.roles.layout = base.layout;
    out_.roles.role_of_rank.assign(static_cast<std::size_t>(world), kNone);
  }

  Result<FoundRoles> run() && {
    for (std::size_t ri = 0; ri < base_.names.size(); ++ri) PRISM_RETURN_IF_ERROR(find(ri));
    std::sort(out_.capture.begin(), out_.capture.end());
    return std::move(out_);
  }

 private:
  const Layout& layout() const { return base_.layout; }

  Status find(std::size_t ri) {
    const std::string& name = base_.names[ri];
    const std::vector<Rank>& ranks = base_.ranks[ri];
    std::vector<Rank> captured;
    for (const auto& [r, p] : by_rank_) {
      if (base_.role_of_rank[static_cast<std::size_t>(r)] == static_cast<std::int32_t>(ri))
        captured.push_back(r);
    }
    const RoleSplit split = split_role(
        layout(), layout().find_dim("pp"), ranks, captured, hints_.real, hints_.listed,
        [&](Rank a, Rank b) { return check_same_program(layout(), program(a), program(b)); });
    const std::string context = fmt::format(
        "job '{}': role '{}' (a pipeline stage): its ranks do not all run one program, as the "
        "layout's roles assume",
        job_.name, name);
    switch (split.kind) {
      case RoleSplit::Kind::kOne:
        if (const Rank own = own_peer(ranks, captured); own != kNone) {
          need(fmt::format("job '{}': role '{}' (a pipeline stage): its captured ranks {} name "
                           "one peer alike, rank {}, which cannot run their program",
                           job_.name, name, compact_ranks(captured), own),
               {own});
        }
        add(name, ranks, "");
        return Status::ok();
      case RoleSplit::Kind::kCapture:
        need(fmt::format("{}: {}", context, split.why.message()), split.capture);
        add(name, ranks, "");
        return Status::ok();
      case RoleSplit::Kind::kSplit:
        for (std::size_t k = 0; k < split.rule.classes.size(); ++k) {
          std::string what = split.rule.what[k];
          if (what.rfind("its ", 0) == 0) what = fmt::format("{}'s {}", name, what.substr(4));
          add(fmt::format("{}.{}", name, split.rule.names[k]), split.rule.classes[k],
              std::move(what));
        }
        out_.splits.push_back(
            fmt::format("{} is split by {}, as {}", name, split.rule.rule, split.why.message()));
        return Status::ok();
      case RoleSplit::Kind::kNone:
        break;
    }
    return Status::invalid_argument(fmt::format(
        "{}, and no rule of the layout splits it as its captured ranks {} run (tried: {}): {}",
        context, compact_ranks(captured), fmt::join(split.tried, "; "), split.why.message()));
  }

  const RankProgram& program(Rank r) const { return *by_rank_.at(r); }

  // A rank of the role that the captured ranks' program, moved there, would
  // make its own peer: a peer they all name alike (anchored: the root of a
  // gather) is that rank itself, so it runs another program. kNone: none.
  Rank own_peer(const std::vector<Rank>& ranks, const std::vector<Rank>& captured) const {
    if (captured.size() < 2) return kNone;
    const RankProgram& rep = program(captured.front());
    std::set<std::size_t> anchored;
    for (std::size_t i = 1; i < captured.size(); ++i)
      (void)check_same_program(layout(), rep, program(captured[i]), &anchored);
    for (Rank r : ranks) {
      for (std::size_t k : anchored) {
        if (anchor(layout(), rep.peers[k], rep.rank, r) == r) return r;
      }
    }
    return kNone;
  }

  // Ranks to capture before the roles are known; `why` is said when none
  // was asked for before.
  void need(std::string why, const std::vector<Rank>& ranks) {
    if (out_.capture.empty()) out_.pending = std::move(why);
    out_.capture.insert(out_.capture.end(), ranks.begin(), ranks.end());
  }

  void add(std::string name, std::vector<Rank> ranks, std::string what) {
    SliceRoles& roles = out_.roles;
    for (Rank r : ranks)
      roles.role_of_rank[static_cast<std::size_t>(r)] =
          static_cast<std::int32_t>(roles.names.size());
    roles.names.push_back(std::move(name));
    roles.ranks.push_back(std::move(ranks));
    roles.what.push_back(std::move(what));
  }

  const JobSpec& job_;
  const SliceRoles& base_;
  const RoleHints& hints_;
  std::map<Rank, const RankProgram*> by_rank_;
  FoundRoles out_;
};

}  // namespace

Result<FoundRoles> find_roles(const JobSpec& job, const std::vector<RankProgram>& captures,
                              const RoleHints& hints) {
  PRISM_ASSIGN_OR_RETURN(const SliceRoles base, slice_roles(job, nullptr));
  return RoleFinder(job, base, captures, hints).run();
}

}  // namespace prism
