// Splitting a role whose captured ranks run different programs.
//
// A role of the layout (a pipeline stage) assumes that its ranks run one
// program. A rank-dependent program breaks that: rank 0 gathers, even ranks
// send first and odd ranks receive first, the first rank of a group logs.
// Such a role is split by a rule of the layout, taken from a short list of
// candidates, each a partition of the role's ranks into classes:
//   - its first rank, and the others; its last rank, and the others;
//   - for each dimension d of the grid (size > 1, not the role's own): d
//     rank 0 and the others, the last d rank and the others, even and odd d
//     ranks (size > 2; with 2 it is d rank 0);
//   - even and odd ranks;
//   - where the user listed ranks of the role (--capture-ranks), only when
//     none of the above fits: each listed rank a class of its own, and the
//     others split by one of the above, or not at all.
// Candidates that give the same classes count once (the first named).
//
// Which candidate: every candidate's classes are probed, each by its first
// and last rank (and the emulation's real ranks in it, which represent
// their class); the captures then rule candidates out: one whose class
// holds two captured ranks whose programs differ cannot be right. The
// coarsest candidate left (fewest classes; the first in the list above on
// a tie) splits the role. Each class of it then has a representative (its
// lowest captured rank) and, with more than one rank, a second captured
// rank found to run the same program: it is verified as the layout's roles
// are. No candidate left: the role's ranks cannot be told apart by a rule,
// and the caller stops with the first difference found.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "graph/layout.h"
#include "graph/op.h"
#include "util/status.h"

namespace prism {

struct RoleSplitRule {
  std::string rule;                        // "its first rank", "even and odd dp ranks"
  std::vector<std::string> names;          // class -> name suffix: "first", "dp-even"
  std::vector<std::string> what;           // class -> "its first rank", "its even dp ranks"
  std::vector<std::vector<Rank>> classes;  // class -> its ranks, ascending
};

// The candidates for the role of `ranks` (ascending), in the order above,
// before any listed rank is set apart. `fixed_dim`: the role's own
// dimension (pp), or -1.
std::vector<RoleSplitRule> split_candidates(const Layout& l, int fixed_dim,
                                            const std::vector<Rank>& ranks);
// `rule` with each of `apart` (ranks of the role) a class of its own.
RoleSplitRule set_apart(const RoleSplitRule& rule, const std::vector<Rank>& apart);

// Whether captured ranks a and b run one program (the error says where not).
using SameProgram = std::function<Status(Rank a, Rank b)>;

struct RoleSplit {
  enum class Kind {
    kOne,      // every captured rank runs the representative's program
    kSplit,    // split by `rule`
    kCapture,  // capture `capture` too, then decide again
    kNone,     // no candidate fits: `why` is the first difference
  };
  Kind kind = Kind::kOne;
  RoleSplitRule rule;
  std::vector<Rank> capture;       // ascending
  Status why;                      // kSplit, kNone: the first difference found
  std::vector<Rank> differ;        // kSplit, kNone: the two ranks of `why`
  std::vector<std::string> tried;  // kNone: the candidates ruled out
};

// Decides the role of `ranks` (ascending) from the ranks captured so far
// (`captured`, any order; the role's own and no others). `real`: the
// emulation's real ranks (each represents its class); `listed`: the ranks
// the user asked to capture (--capture-ranks).
RoleSplit split_role(const Layout& l, int fixed_dim, const std::vector<Rank>& ranks,
                     const std::vector<Rank>& captured, const std::vector<Rank>& real,
                     const std::vector<Rank>& listed, const SameProgram& same);

// "0-3", "1,3,5,7", "0,2-5,9": ascending ranks, runs of 3 or more as ranges.
std::string compact_ranks(const std::vector<Rank>& ranks);

}  // namespace prism
