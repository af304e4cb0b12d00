// ObjectPayloads: the objects that captured ranks sent with torch's
// send_object_list, broadcast_object_list, all_gather_object and
// gather_object (slicing/object_keys.h), and
// the answers for the objects a virtual rank sends: what its role's
// captured rank sent, moved to its place in the grid (docs/torch-backend.md,
// "Objects").
//
// During the captures (runtime/slice_capture.h) each capture's rendezvous
// store records its rank's objects here as the program SETs them, and a
// captured rank that receives from a virtual rank is answered from here: at
// once when the sender's role's capture has recorded the object, later
// while that capture is still running (captures side by side), and with an
// error when that capture ended without it or has not started. The
// emulation answers from what the captures recorded, by its final roles.
//
// Thread-safe: the captures' stores call in from their own threads.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "runtime/rendezvous_store.h"
#include "slicing/capture_file.h"

namespace prism::runtime {

// Which rank's capture speaks for each rank.
struct ObjectRoles {
  Layout layout;
  std::vector<std::string> names;          // role -> name
  std::vector<std::int32_t> role_of_rank;  // rank -> role
  std::vector<Rank> captured;              // role -> its captured rank; kNone: none
  // Set when no virtual rank's object can be known (the graph is a model's,
  // or came from a file): why, and what to change.
  std::string unknown;
};

class ObjectPayloads {
 public:
  // A captured rank's object: `key` from "prism/object/" on.
  void record(const std::string& key, std::vector<std::uint8_t> bytes);
  // A capture of `rank` begins, or has ended (its objects are all recorded).
  void started(Rank rank);
  void finished(Rank rank);
  // The object at `key` (a virtual sender's) as `roles` place it.
  ObjectAnswer answer(const std::string& key, const ObjectRoles& roles) const;
  std::size_t size() const;
  // What `rank` sent, by key: its capture file's "objects".
  std::vector<CapturedObject> sent_by(Rank rank) const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::vector<std::uint8_t>> objects_;
  std::set<Rank> running_;
  std::set<Rank> finished_;
};

}  // namespace prism::runtime
