// The color PyTorch passes to ncclCommSplit for a new process group, and the
// groups a capture looks for it among.
//
// torch.distributed (2.2 and later) creates a group by splitting the default
// communicator when it can; each member passes the color
//   abs(hash(tuple(ranks))) % 2**31
// where `ranks` are the group's global ranks in ascending order and `hash`
// is CPython's tuple hash (3.8 and later; an int hashes to itself). The
// coordinator compares a split's color with this value for each group the
// graph offers, and so tells which group a PyTorch program asked for
// (docs/nccl-shim.md, "ncclCommSplit").
//
// torch.distributed.split_group (what init_device_mesh uses on NCCL when the
// default group is bound to a device) passes another color: the group's
// lowest rank in the parent's numbering (ProcessGroupNCCL::split, torch
// 2.11). Only the groups that one split makes are told apart by it, so a
// color of this kind names a group only among candidates known otherwise.
//
// A capture has no graph: it tries the groups of a row-major mesh laid over
// the parent (mesh_groups_of), which are those torch's init_device_mesh and
// Megatron's parallel layout make.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "graph/layout.h"

namespace prism::runtime {

std::int32_t torch_split_color(std::span<const std::int32_t> ranks);

// split_group's color for `group` (global ranks) split from `parent` (global
// ranks in the parent's order): the lowest position in `parent` of a member;
// -1 when a member is not in the parent.
std::int32_t torch_split_group_color(std::span<const std::int32_t> group,
                                     std::span<const std::int32_t> parent);

// One group of a mesh over a parent communicator: `size` ranks `stride`
// apart in the parent's order, as global ranks in ascending order.
struct MeshGroup {
  int stride = 1;
  int size = 1;
  std::vector<std::int32_t> ranks;
};

// The groups that hold the parent's rank at `position`, one for each stride
// t and size s (s >= 2, plus the rank alone) with t * s dividing the parent's
// size: the positions base + i * t for i < s, where base = (position /
// (t * s)) * (t * s) + position % t, mapped through `members`. These are
// every dimension of any row-major mesh over the parent, and every run of
// adjacent dimensions flattened (contiguous tensor-parallel groups, strided
// data- and pipeline-parallel ones). The rank alone comes first, then the
// others by stride and size; the parent itself is stride 1, size
// members.size().
std::vector<MeshGroup> mesh_groups_of(std::span<const std::int32_t> members, int position);

// The groups of `rank` along each dimension of `layout` of more than one
// rank, outermost first (pp before dp before tp: the order in which
// init_device_mesh splits a mesh shaped as the job), each ascending.
std::vector<std::vector<std::int32_t>> grid_groups_of(const Layout& layout, Rank rank);

}  // namespace prism::runtime
