#include "runtime/rendezvous_store_keys.h"

#include <algorithm>
#include <charconv>
#include <optional>

#include <fmt/format.h>

#include "util/hash.h"

namespace prism::runtime::store_keys {
namespace {

constexpr std::string_view kBarrierPrefix = "store_based_barrier_key:";
constexpr std::string_view kLastWorker = ":last_worker";
constexpr std::string_view kRootTag = "UniqueNCCLID:";

std::vector<std::string_view> split(std::string_view key) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (start <= key.size()) {
    std::size_t end = key.find('/', start);
    if (end == std::string_view::npos) end = key.size();
    if (end > start) parts.push_back(key.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

// A non-negative decimal that fits an int32; nullopt otherwise.
std::optional<std::int32_t> decimal(std::string_view s) {
  if (s.empty() || s.size() > 9) return std::nullopt;
  std::int32_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

// torch 2.x puts the backend's device type ("cuda", "cpu") between the group
// and the backend's own keys.
bool is_device_name(std::string_view s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= 'a' && c <= 'z') || c == '_'; });
}

// One component after the group: the NCCL id of a collective communicator
// ("<counter>"), of a send/recv pair ("<a>:<b>"), or of a scalable root.
bool classify_nccl(std::string_view key, std::string_view part, KeyInfo& info) {
  if (decimal(part)) {
    info.kind = KeyKind::kNcclId;
    info.rank = 0;
    return true;
  }
  if (auto tag = part.find(kRootTag); tag != std::string_view::npos) {
    auto root = decimal(part.substr(tag + kRootTag.size()));
    if (!root) return false;
    info.kind = KeyKind::kNcclRootId;
    info.rank = *root;
    info.root_prefix = std::string(key.substr(0, key.size() - part.size() + tag));
    return true;
  }
  auto colon = part.find(':');
  if (colon == std::string_view::npos) return false;
  auto a = decimal(part.substr(0, colon));
  auto b = decimal(part.substr(colon + 1));
  if (!a || !b) return false;
  info.kind = KeyKind::kNcclP2pId;
  info.rank = std::min(*a, *b);
  info.peer = std::max(*a, *b);
  return true;
}

// Two components after the group: Gloo's "<device index>/<rank>" (the pair
// addresses) or "<device index>/rank_<rank>" (the host name).
bool classify_gloo(std::string_view index, std::string_view owner, KeyInfo& info) {
  if (!decimal(index)) return false;
  if (owner.starts_with("rank_")) owner.remove_prefix(5);
  auto r = decimal(owner);
  if (!r) return false;
  info.kind = KeyKind::kGlooAddress;
  info.rank = *r;
  return true;
}

}  // namespace

KeyInfo classify(std::string_view key) {
  KeyInfo info;
  if (key == "init/") {
    info.kind = KeyKind::kWorkerCounter;
    return info;
  }
  const auto parts = split(key);
  if (parts.empty()) return info;
  const std::string_view last = parts.back();
  if (last.starts_with(kBarrierPrefix) && !last.ends_with(kLastWorker)) {
    info.kind = KeyKind::kBarrierCounter;
    info.barrier_name = std::string(last.substr(kBarrierPrefix.size()));
    return info;
  }
  const std::size_t n = parts.size();
  if (n >= 3 && parts[n - 3] == "prism" && parts[n - 2] == "group") {
    info.kind = KeyKind::kGroupDeclaration;
    info.group = std::string(last);
    return info;
  }
  for (std::size_t i = 0; i + 2 < n; ++i) {
    if (parts[i] != "prism" || parts[i + 1] != "object") continue;
    auto src = decimal(parts[i + 2]);
    if (!src) break;
    info.kind = KeyKind::kObject;
    info.rank = *src;
    for (std::size_t j = i; j < n; ++j)
      info.object_key += std::string(parts[j]) + (j + 1 < n ? "/" : "");
    return info;
  }
  auto pg = std::find(parts.begin(), parts.end(), "default_pg");
  if (pg == parts.end() || std::next(pg) == parts.end()) return info;
  // The group's name at parts[g], then (torch 2.x) the device, then the
  // backend's own key.
  const auto at = [&](std::size_t g) {
    KeyInfo found;
    std::size_t j = g + 1;
    if (j + 1 < n && is_device_name(parts[j])) ++j;
    if ((n - j == 1 && classify_nccl(key, parts[j], found)) ||
        (n - j == 2 && classify_gloo(parts[j], parts[j + 1], found))) {
      found.group = std::string(parts[g]);
    }
    return found;
  };
  const auto g = static_cast<std::size_t>(pg - parts.begin()) + 1;
  KeyInfo found = at(g);
  // torch 2.11 makes a new group's store within the default group's
  // ("default_pg/0/<group>/cuda/0"): the group's name follows the default
  // group's, and a device follows it.
  if (found.kind == KeyKind::kPlain && g + 2 < n && !is_device_name(parts[g + 1]) &&
      is_device_name(parts[g + 2])) {
    found = at(g + 1);
  }
  return found;
}

Result<std::vector<std::int32_t>> parse_members(std::string_view text) {
  std::vector<std::int32_t> ranks;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view item = text.substr(start, end - start);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    auto r = decimal(item);
    if (!r) {
      return Status::invalid_argument(
          fmt::format("item {} ('{}') is not a rank", ranks.size() + 1, item));
    }
    ranks.push_back(*r);
    start = end + 1;
  }
  return ranks;
}

std::vector<std::uint8_t> synthesized_id(std::string_view key) {
  const std::uint64_t h = fnv1a(key.data(), key.size());
  std::vector<std::uint8_t> id;
  id.reserve(kNcclUniqueIdBytes);
  constexpr std::string_view kTag = "prism-id";
  id.insert(id.end(), kTag.begin(), kTag.end());
  while (id.size() < kNcclUniqueIdBytes) {
    for (int b = 0; b < 8; ++b) id.push_back(static_cast<std::uint8_t>(h >> (8 * b)));
  }
  return id;
}

std::int32_t scalable_root_rank(std::int32_t root, std::int32_t n_roots, std::int32_t n_ranks) {
  const std::int32_t per_root = n_ranks / n_roots;
  const std::int32_t longer = n_ranks % n_roots;  // roots that lead per_root + 1 ranks
  if (root < longer) return root * (per_root + 1);
  return longer * (per_root + 1) + (root - longer) * per_root;
}

}  // namespace prism::runtime::store_keys
