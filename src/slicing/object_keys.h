// Object keys: where prism_torch publishes the objects a rank sends with
// torch.distributed's send_object_list and broadcast_object_list, in the
// rendezvous store (docs/torch-backend.md, "Objects"), so that a receiver
// gets them although the emulated backend carries no data:
//
//   prism/object/<src>/to/<dst>/<n>            the n-th object list <src> sends to <dst>
//   prism/object/<src>/group/<ranks>/<n>       the n-th one <src> broadcasts to the group
//   prism/object/<src>/all_gather/<ranks>/<n>  <src>'s object in its n-th all_gather_object
//   prism/object/<src>/gather/<ranks>/<n>      <src>'s object in its n-th gather_object
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

// The torch.distributed call that sends an object.
enum class ObjectCall { kSend, kBroadcast, kAllGather, kGather };

struct ObjectKey {
  ObjectCall call = ObjectCall::kSend;
  Rank src = 0;
  Rank dst = kNone;         // kSend: the receiver
  std::vector<Rank> group;  // the others: the group, global ranks in group order
  std::int64_t n = 0;
};

// all_gather_object and gather_object: every rank of the group sends its
// object, so a rank whose object cannot be known yet may take the gatherer's
// own in its slot (runtime/object_payloads.h).
bool is_gather(ObjectCall c);

// The key from "prism/object/" on, as prism_torch writes it; nullopt for any
// other text.
std::optional<ObjectKey> parse_object_key(std::string_view key);
std::string format_object_key(const ObjectKey& k);

// The key under which rank `to` sent what k.src sends, moved as k.src moves
// to `to` (slicing/slices.h: each coordinate shifts by to's minus k.src's).
ObjectKey move_object_key(const Layout& l, const ObjectKey& k, Rank to);

// "the 2nd send_object_list from rank 0 to rank 32",
// "the 1st broadcast_object_list from rank 0 over ranks 0:1:64",
// "rank 3's object in its 1st all_gather_object over ranks 0:1:8".
std::string describe_object_key(const ObjectKey& k);

// The call alone, as a capture that lacks it did not record it:
// "2nd send_object_list from rank 0 to rank 32",
// "2nd all_gather_object over ranks 0:1:8 with rank 0's object".
std::string describe_object_call(const ObjectKey& k);

}  // namespace prism
