// Internal to slicing (slicing/slices.cc): moving ranks through the grid,
// naming communicators by their shape, and checking that two captures of
// one role are the same program.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "graph/layout.h"
#include "slicing/rank_program.h"
#include "util/status.h"

namespace prism::slices_internal {

// `m` moved as `from` moves to `to`: each coordinate shifts by to's minus
// from's, modulo the dimension's size.
Rank move(const Layout& l, Rank m, Rank from, Rank to);
// `m` anchored as `from` moves to `to`: where m's coordinate is from's, it
// becomes to's; elsewhere it stays (the root of a gather, rank 0 of a group,
// which every rank of a role names whatever its place).
Rank anchor(const Layout& l, Rank m, Rank from, Rank to);
// Each member moved; sorted again when `members` was ascending.
std::vector<Rank> move_group(const Layout& l, const std::vector<Rank>& members, Rank from, Rank to);

// A group's shape in the grid, the same for every rank that holds it and
// for every rank it moves to.
struct GroupShape {
  bool grid = false;      // whole dimensions, the rest fixed, in rank order
  std::vector<int> dims;  // grid: the dimensions it spans (size > 1)
  std::string name;       // "tp", "dp+pp", "world", "pp{0,3}", "group-1a2b3c4d"
};
// `fixed_dim`: the dimension ranks of a role share (pp), whose coordinates
// are named as they are; others are named up to a shift.
Result<GroupShape> group_shape(const Layout& l, const std::vector<Rank>& members, int fixed_dim);

// Whether `b` (rank b.rank) runs `a`'s program (rank a.rank) moved to its
// place: the same communication, memory and marker ops in the same order,
// on moved communicators and peers. Compute is measured, so it differs.
// A peer of a's matches b's when moved, or else when anchored (above); the
// error names the first difference. `anchored`, when given, gets the index
// (in a.peers) of each peer that matched only anchored.
Status check_same_program(const Layout& l, const RankProgram& a, const RankProgram& b,
                          std::set<std::size_t>* anchored = nullptr);

}  // namespace prism::slices_internal
