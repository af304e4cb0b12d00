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
// A capture has no graph: it tries the groups of a row-major mesh laid over
// the parent (mesh_groups_of), which are those torch's init_device_mesh and
// Megatron's parallel layout make.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace prism::runtime {

std::int32_t torch_split_color(std::span<const std::int32_t> ranks);

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

}  // namespace prism::runtime
