// The color PyTorch passes to ncclCommSplit for a new process group.
//
// torch.distributed (2.2 and later) creates a group by splitting the default
// communicator when it can; each member passes the color
//   abs(hash(tuple(ranks))) % 2**31
// where `ranks` are the group's global ranks in ascending order and `hash`
// is CPython's tuple hash (3.8 and later; an int hashes to itself). The
// coordinator compares a split's color with this value for each group the
// graph offers, and so tells which group a PyTorch program asked for
// (docs/nccl-shim.md, "ncclCommSplit").
#pragma once

#include <cstdint>
#include <span>

namespace prism::runtime {

std::int32_t torch_split_color(std::span<const std::int32_t> ranks);

}  // namespace prism::runtime
