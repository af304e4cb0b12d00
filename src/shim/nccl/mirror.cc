#include "shim/nccl/mirror.h"

#include <algorithm>

namespace prism::nccl {
namespace {

void add(std::vector<Copy>& out, void* dst, const void* src, std::size_t bytes) {
  if (bytes > 0 && dst != src) out.push_back(Copy{dst, src, bytes});
}

}  // namespace

std::vector<Copy> mirror_copies(const MirrorArgs& a) {
  std::vector<Copy> out;
  auto* recv = static_cast<char*>(a.recv);
  const auto* send = static_cast<const char*>(a.send);
  const auto n = static_cast<std::size_t>(std::max(a.nranks, 1));
  switch (a.code) {
    case PRISM_ALL_REDUCE:
      add(out, recv, send, a.chunk);
      break;
    case PRISM_REDUCE:
    case PRISM_BROADCAST:
      if (a.rank == a.root) add(out, recv, send, a.chunk);
      break;
    case PRISM_REDUCE_SCATTER:  // this rank's chunk of the input
      add(out, recv, send + static_cast<std::size_t>(a.rank) * a.chunk, a.chunk);
      break;
    case PRISM_ALL_TO_ALL:  // chunk j to chunk j
      add(out, recv, send, a.chunk * n);
      break;
    case PRISM_ALL_GATHER:
      add(out, recv, send, a.chunk);
      for (std::size_t filled = 1; filled < n;) {
        const std::size_t k = std::min(filled, n - filled);
        add(out, recv + filled * a.chunk, recv, k * a.chunk);
        filled += k;
      }
      break;
    default:  // send, recv: nothing local to copy
      break;
  }
  return out;
}

}  // namespace prism::nccl
