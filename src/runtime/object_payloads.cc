#include "runtime/object_payloads.h"

#include <optional>

#include <fmt/format.h>

#include "slicing/object_keys.h"

namespace prism::runtime {

namespace {

ObjectAnswer failed(std::string why) {
  ObjectAnswer a;
  a.state = ObjectAnswer::State::kFailed;
  a.error = std::move(why);
  return a;
}

}  // namespace

void ObjectPayloads::record(const std::string& key, std::vector<std::uint8_t> bytes) {
  std::lock_guard lock(mu_);
  objects_[key] = std::move(bytes);
}

void ObjectPayloads::started(Rank rank) {
  std::lock_guard lock(mu_);
  running_.insert(rank);
}

void ObjectPayloads::finished(Rank rank) {
  std::lock_guard lock(mu_);
  running_.erase(rank);
  finished_.insert(rank);
}

std::size_t ObjectPayloads::size() const {
  std::lock_guard lock(mu_);
  return objects_.size();
}

std::vector<CapturedObject> ObjectPayloads::sent_by(Rank rank) const {
  std::vector<CapturedObject> out;
  std::lock_guard lock(mu_);
  for (const auto& [key, bytes] : objects_) {
    const std::optional<ObjectKey> k = parse_object_key(key);
    if (k && k->src == rank) out.push_back({key, bytes});
  }
  return out;
}

ObjectAnswer ObjectPayloads::answer(const std::string& key, const ObjectRoles& roles) const {
  const std::optional<ObjectKey> k = parse_object_key(key);
  if (!k) return failed(fmt::format("'{}' is not an object key of PrismLLM's", key));
  const std::string asked = describe_object_key(*k);
  // A gathered object that cannot be known yet: the gatherer keeps its own
  // in that slot (as the emulated all-gather does with tensors) and says so.
  // Any other object: an error.
  const auto not_known = [&](std::string why) {
    ObjectAnswer a = failed(std::move(why));
    if (is_gather(k->call)) a.state = ObjectAnswer::State::kUnknown;
    return a;
  };
  if (!roles.unknown.empty())
    return not_known(fmt::format("{}: rank {} is virtual and its object is not known: {}", asked,
                                 k->src, roles.unknown));
  if (k->src < 0 || static_cast<std::size_t>(k->src) >= roles.role_of_rank.size())
    return failed(fmt::format("{}: rank {} is not a rank of the job", asked, k->src));
  const auto role = static_cast<std::size_t>(roles.role_of_rank[static_cast<std::size_t>(k->src)]);
  const Rank rep = roles.captured[role];
  const std::string& name = roles.names[role];
  if (rep == kNone)
    return not_known(fmt::format(
        "{}: rank {} is virtual and its role {} was not captured, so the object is not known: "
        "make rank {} real (--real-ranks) so that it sends its own objects",
        asked, k->src, name, k->src));
  const ObjectKey moved = move_object_key(roles.layout, *k, rep);
  const std::string moved_key = format_object_key(moved);
  std::lock_guard lock(mu_);
  if (auto it = objects_.find(moved_key); it != objects_.end()) {
    ObjectAnswer a;
    a.state = ObjectAnswer::State::kReady;
    a.bytes = it->second;
    return a;
  }
  if (running_.contains(rep)) return ObjectAnswer{};  // its capture may still send it
  const std::string sends =
      rep == k->src
          ? fmt::format("{}: rank {} is virtual here and sends what its capture sent", asked, rep)
          : fmt::format(
                "{}: rank {} is virtual and sends what rank {}, the captured rank of its "
                "role {}, sent",
                asked, k->src, rep, name);
  if (!finished_.contains(rep))
    return not_known(fmt::format(
        "{}, but the capture of rank {} runs after this one, so {} is not known yet: capture "
        "the roles side by side (--capture-jobs 2 or more), so that the receiver gets each "
        "object as the sender's capture sends it",
        sends, rep, describe_object_key(moved)));
  return failed(fmt::format(
      "{}, and the capture of rank {} (role {}) recorded no {}: the program did not make that "
      "call there (the ranks of a role diverged, or the receiver asks for more objects than "
      "the sender sent). Make every rank of a role send the same objects in the same order, or "
      "make rank {} real (--real-ranks) so that it sends its own",
      sends, rep, name, describe_object_call(moved), k->src));
}

}  // namespace prism::runtime
