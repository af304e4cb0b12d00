// Communicator slots: names like "tp", "dp" or "pp_next" that ops use instead
// of concrete ranks. Each rank resolves a slot through the layout:
//
//   group slot  -> the rank's communicator group (collectives). Either the
//                  ranks that differ from it only along some grid dimensions
//                  ("dp" varies dim dp), or an explicit table of groups, as an
//                  imported trace carries.
//   peer slot   -> one peer rank (send/recv). Either a step along one grid
//                  dimension ("pp_next" = +1 along pp, optionally wrapping), or
//                  an explicit per-rank table.
//
// Storage is O(ranks) per explicit slot and O(1) per grid slot.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/layout.h"
#include "graph/op.h"  // kNone

namespace prism {

struct CommSlot {
  enum class Kind : std::uint8_t { kGroup, kPeer };

  std::string name;
  Kind kind = Kind::kGroup;

  // Grid group: the dimensions along which members differ (indices into
  // Layout::dims). Empty with `explicit_groups` set means an explicit table.
  std::vector<int> dims;
  // Explicit groups: each a list of ranks in communicator-rank order.
  std::vector<std::vector<Rank>> explicit_groups;
  // Rank -> index into explicit_groups, kNone when not a member. Derived.
  std::vector<std::int32_t> group_of_rank;

  // Grid peer: peer = rank moved by `offset` along `peer_dim`; without `wrap`
  // a step past either end has no peer.
  int peer_dim = -1;
  int offset = 0;
  bool wrap = false;
  // Explicit peers: rank -> peer rank, kNone for none.
  std::vector<Rank> explicit_peers;

  // Named constructors. Explicit group tables still need finalize_graph() to
  // derive group_of_rank.
  static CommSlot grid_group(std::string name, std::vector<int> dims);
  static CommSlot grid_peer(std::string name, int dim, int offset, bool wrap = false);
  static CommSlot explicit_group(std::string name, std::vector<std::vector<Rank>> groups);
  static CommSlot explicit_peer(std::string name, std::vector<Rank> peers);
};

// Resolves slots for ranks. Cheap to copy (holds references).
class SlotResolver {
 public:
  SlotResolver(const Layout& layout, const std::vector<CommSlot>& slots)
      : layout_(&layout), slots_(&slots) {}

  // Identifier of `r`'s group in slot `s`, unique within the slot (the lowest
  // member rank for grid slots), or kNone if `r` belongs to no group.
  std::int64_t group_id(int s, Rank r) const;
  int group_size(int s, Rank r) const;
  // Members of `r`'s group in communicator-rank order (grid: ascending).
  void members(int s, Rank r, std::vector<Rank>* out) const;
  // Position of `r` within its group.
  int index_in_group(int s, Rank r) const;
  // Peer of `r` through peer slot `s`, or kNone.
  Rank peer(int s, Rank r) const;

 private:
  const Layout* layout_;
  const std::vector<CommSlot>* slots_;
};

}  // namespace prism
