// Object keys: where prism_torch publishes the objects a rank sends with
// torch.distributed's send_object_list and broadcast_object_list, in the
// rendezvous store (docs/torch-backend.md, "Objects"), so that a receiver
// gets them although the emulated backend carries no data:
//
//   prism/object/<src>/to/<dst>/<n>       the n-th object list <src> sends to <dst>
//   prism/object/<src>/group/<ranks>/<n>  the n-th one <src> broadcasts to the group
//
// (global ranks; <n> counts from 0 per <src> and <dst> or group; <ranks> is
// the group's global ranks in group order, "first:step:count" when they
// step evenly, else "0,5,2"). A virtual rank sends what its role's captured
// rank sent: the key moved to the captured rank's place in the grid names
// that capture's object.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "graph/layout.h"
#include "graph/op.h"  // kNone

namespace prism {

struct ObjectKey {
  Rank src = 0;
  Rank dst = kNone;         // a send_object_list's receiver; kNone: a broadcast
  std::vector<Rank> group;  // a broadcast's group, global ranks in group order
  std::int64_t n = 0;
};

// The key from "prism/object/" on, as prism_torch writes it; nullopt for any
// other text.
std::optional<ObjectKey> parse_object_key(std::string_view key);
std::string format_object_key(const ObjectKey& k);

// The key under which rank `to` sent what k.src sends, moved as k.src moves
// to `to` (slicing/slices.h: each coordinate shifts by to's minus k.src's).
ObjectKey move_object_key(const Layout& l, const ObjectKey& k, Rank to);

// "the 2nd send_object_list from rank 0 to rank 32",
// "the 1st broadcast_object_list from rank 0 over ranks 0:1:64".
std::string describe_object_key(const ObjectKey& k);

}  // namespace prism
