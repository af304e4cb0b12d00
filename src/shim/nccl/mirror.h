// Mirrored data: what a collective leaves in this rank's receive buffer when
// every peer holds what this rank holds (the symmetric job the emulation
// assumes), as copies of this rank's own bytes. The drop-in has no kernels,
// so a reduction's result is this rank's input unchanged (what AVG, MIN and
// MAX of identical inputs give; SUM is not multiplied by the group size).
// The copies make checks that compare peers' data pass (DDP's parameter
// check all-gathers shapes) and keep out-of-place outputs from being left
// uninitialised; docs/nccl-shim.md ("Data") has the table.
#pragma once

#include <cstddef>
#include <vector>

#include "prism/client.h"

namespace prism::nccl {

struct Copy {
  void* dst = nullptr;
  const void* src = nullptr;
  std::size_t bytes = 0;
};

struct MirrorArgs {
  prism_op_code code = PRISM_ALL_REDUCE;
  const void* send = nullptr;
  void* recv = nullptr;
  std::size_t chunk = 0;  // bytes: count x element size (per rank, or per peer for all-to-all)
  int nranks = 1;
  int rank = 0;
  int root = 0;
};

// The copies, in the order they must run (later ones read what earlier ones
// wrote). An all-gather fills slot 0 from the input, then doubles: slots
// [0, k) to [k, 2k), so n ranks take 1 + ceil(log2 n) copies. Copies whose
// source is their destination are left out; none for send, recv, a reduce
// off the root or a broadcast off the root (the root's data is unknown).
std::vector<Copy> mirror_copies(const MirrorArgs& a);

}  // namespace prism::nccl
