#include "graph/comm_slot.h"

#include <algorithm>
#include <utility>

#include "graph/op.h"
#include "util/check.h"

namespace prism {

CommSlot CommSlot::grid_group(std::string name, std::vector<int> dims) {
  CommSlot s;
  s.name = std::move(name);
  s.dims = std::move(dims);
  return s;
}

CommSlot CommSlot::grid_peer(std::string name, int dim, int offset, bool wrap) {
  CommSlot s;
  s.name = std::move(name);
  s.kind = Kind::kPeer;
  s.peer_dim = dim;
  s.offset = offset;
  s.wrap = wrap;
  return s;
}

CommSlot CommSlot::explicit_group(std::string name, std::vector<std::vector<Rank>> groups) {
  CommSlot s;
  s.name = std::move(name);
  s.explicit_groups = std::move(groups);
  return s;
}

CommSlot CommSlot::explicit_peer(std::string name, std::vector<Rank> peers) {
  CommSlot s;
  s.name = std::move(name);
  s.kind = Kind::kPeer;
  s.explicit_peers = std::move(peers);
  return s;
}

std::int64_t SlotResolver::group_id(int s, Rank r) const {
  const CommSlot& slot = (*slots_)[s];
  PRISM_CHECK(slot.kind == CommSlot::Kind::kGroup, "group_id of a peer slot");
  if (!slot.explicit_groups.empty()) return slot.group_of_rank[r];
  Rank base = r;
  for (int d : slot.dims) base -= layout_->coord(r, d) * layout_->stride(d);
  return base;
}

int SlotResolver::group_size(int s, Rank r) const {
  const CommSlot& slot = (*slots_)[s];
  PRISM_CHECK(slot.kind == CommSlot::Kind::kGroup, "group_size of a peer slot");
  if (!slot.explicit_groups.empty()) {
    std::int32_t g = slot.group_of_rank[r];
    return g == kNone ? 0 : static_cast<int>(slot.explicit_groups[g].size());
  }
  int n = 1;
  for (int d : slot.dims) n *= layout_->dims()[d].size;
  return n;
}

void SlotResolver::members(int s, Rank r, std::vector<Rank>* out) const {
  out->clear();
  const CommSlot& slot = (*slots_)[s];
  if (!slot.explicit_groups.empty()) {
    std::int32_t g = slot.group_of_rank[r];
    if (g != kNone) *out = slot.explicit_groups[g];
    return;
  }
  out->push_back(static_cast<Rank>(group_id(s, r)));
  // Expand along each varying dimension in turn. The result is ascending only
  // when the slot lists its dims innermost first; sort so it always is.
  for (int d : slot.dims) {
    const std::size_t n = out->size();
    for (int c = 1; c < layout_->dims()[d].size; ++c)
      for (std::size_t i = 0; i < n; ++i) out->push_back((*out)[i] + c * layout_->stride(d));
  }
  std::sort(out->begin(), out->end());
}

int SlotResolver::index_in_group(int s, Rank r) const {
  const CommSlot& slot = (*slots_)[s];
  if (!slot.explicit_groups.empty()) {
    std::int32_t g = slot.group_of_rank[r];
    if (g == kNone) return kNone;
    const auto& m = slot.explicit_groups[g];
    for (std::size_t i = 0; i < m.size(); ++i)
      if (m[i] == r) return static_cast<int>(i);
    return kNone;
  }
  // Ascending order of members = mixed-radix number over the varying dims,
  // least significant = innermost (smallest stride).
  std::vector<int> ds = slot.dims;
  std::sort(ds.begin(), ds.end(),
            [&](int a, int b) { return layout_->stride(a) < layout_->stride(b); });
  int idx = 0, mul = 1;
  for (int d : ds) {
    idx += layout_->coord(r, d) * mul;
    mul *= layout_->dims()[d].size;
  }
  return idx;
}

Rank SlotResolver::peer(int s, Rank r) const {
  const CommSlot& slot = (*slots_)[s];
  PRISM_CHECK(slot.kind == CommSlot::Kind::kPeer, "peer of a group slot");
  if (!slot.explicit_peers.empty()) return slot.explicit_peers[r];
  const int size = layout_->dims()[slot.peer_dim].size;
  const int c = layout_->coord(r, slot.peer_dim);
  int nc = c + slot.offset;
  if (slot.wrap) {
    nc = ((nc % size) + size) % size;
  } else if (nc < 0 || nc >= size) {
    return kNone;
  }
  return r + (nc - c) * layout_->stride(slot.peer_dim);
}

}  // namespace prism
