#include "slicing/object_keys.h"

#include <charconv>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "slicing/slices_grid.h"

namespace prism {

namespace {

constexpr std::string_view kPrefix = "prism/object/";
constexpr std::int64_t kMaxRanks = 1 << 24;

std::optional<std::int64_t> number(std::string_view s) {
  std::int64_t v = 0;
  if (s.empty() || s.size() > 18) return std::nullopt;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

std::optional<Rank> rank(std::string_view s) {
  const auto r = number(s);
  if (!r || *r >= kMaxRanks) return std::nullopt;
  return static_cast<Rank>(*r);
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    const std::size_t end = s.find(sep, start);
    parts.push_back(s.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

// "first:step:count" or "a,b,c".
std::optional<std::vector<Rank>> parse_ranks(std::string_view s) {
  std::vector<Rank> ranks;
  const auto stepped = split(s, ':');
  if (stepped.size() == 3) {
    const auto first = number(stepped[0]), step = number(stepped[1]), count = number(stepped[2]);
    if (!first || !step || !count || *count < 1 || *count > kMaxRanks ||
        *first + *step * (*count - 1) >= kMaxRanks)
      return std::nullopt;
    for (std::int64_t i = 0; i < *count; ++i)
      ranks.push_back(static_cast<Rank>(*first + *step * i));
    return ranks;
  }
  if (stepped.size() != 1) return std::nullopt;
  for (std::string_view item : split(s, ',')) {
    const auto r = rank(item);
    if (!r) return std::nullopt;
    ranks.push_back(*r);
  }
  return ranks;
}

std::string format_ranks(const std::vector<Rank>& ranks) {
  if (ranks.size() == 1) return fmt::format("{}:1:1", ranks[0]);
  const Rank step = ranks.size() > 1 ? ranks[1] - ranks[0] : 0;
  bool even = step > 0;
  for (std::size_t i = 1; even && i < ranks.size(); ++i) even = ranks[i] - ranks[i - 1] == step;
  if (even) return fmt::format("{}:{}:{}", ranks[0], step, ranks.size());
  return fmt::format("{}", fmt::join(ranks, ","));
}

const char* gather_name(ObjectCall c) {
  return c == ObjectCall::kGather ? "gather_object" : "all_gather_object";
}

std::string ordinal(std::int64_t n) {
  const std::int64_t k = n + 1;
  const char* suffix = "th";
  if (k % 100 < 11 || k % 100 > 13) {
    if (k % 10 == 1) suffix = "st";
    if (k % 10 == 2) suffix = "nd";
    if (k % 10 == 3) suffix = "rd";
  }
  return fmt::format("{}{}", k, suffix);
}

}  // namespace

bool is_gather(ObjectCall c) {
  return c == ObjectCall::kAllGather || c == ObjectCall::kGather;
}

std::optional<ObjectKey> parse_object_key(std::string_view key) {
  if (!key.starts_with(kPrefix)) return std::nullopt;
  const auto parts = split(key.substr(kPrefix.size()), '/');
  if (parts.size() != 4) return std::nullopt;
  const auto src = rank(parts[0]);
  const auto n = number(parts[3]);
  if (!src || !n) return std::nullopt;
  ObjectKey k;
  k.src = *src;
  k.n = *n;
  if (parts[1] == "to") {
    const auto dst = rank(parts[2]);
    if (!dst) return std::nullopt;
    k.dst = *dst;
    return k;
  }
  if (parts[1] == "group") {
    k.call = ObjectCall::kBroadcast;
  } else if (parts[1] == "all_gather") {
    k.call = ObjectCall::kAllGather;
  } else if (parts[1] == "gather") {
    k.call = ObjectCall::kGather;
  } else {
    return std::nullopt;
  }
  auto group = parse_ranks(parts[2]);
  if (!group) return std::nullopt;
  k.group = std::move(*group);
  return k;
}

std::string format_object_key(const ObjectKey& k) {
  switch (k.call) {
    case ObjectCall::kSend:
      return fmt::format("{}{}/to/{}/{}", kPrefix, k.src, k.dst, k.n);
    case ObjectCall::kBroadcast:
      return fmt::format("{}{}/group/{}/{}", kPrefix, k.src, format_ranks(k.group), k.n);
    case ObjectCall::kAllGather:
      return fmt::format("{}{}/all_gather/{}/{}", kPrefix, k.src, format_ranks(k.group), k.n);
    case ObjectCall::kGather:
      return fmt::format("{}{}/gather/{}/{}", kPrefix, k.src, format_ranks(k.group), k.n);
  }
  return {};
}

ObjectKey move_object_key(const Layout& l, const ObjectKey& k, Rank to) {
  ObjectKey moved = k;
  moved.src = to;
  if (k.call == ObjectCall::kSend) {
    moved.dst = slices_internal::move(l, k.dst, k.src, to);
  } else {
    moved.group = slices_internal::move_group(l, k.group, k.src, to);
  }
  return moved;
}

std::string describe_object_call(const ObjectKey& k) {
  switch (k.call) {
    case ObjectCall::kSend:
      return fmt::format("{} send_object_list from rank {} to rank {}", ordinal(k.n), k.src, k.dst);
    case ObjectCall::kBroadcast:
      return fmt::format("{} broadcast_object_list from rank {} over ranks {}", ordinal(k.n), k.src,
                         format_ranks(k.group));
    case ObjectCall::kAllGather:
    case ObjectCall::kGather:
      return fmt::format("{} {} over ranks {} with rank {}'s object", ordinal(k.n),
                         gather_name(k.call), format_ranks(k.group), k.src);
  }
  return {};
}

std::string describe_object_key(const ObjectKey& k) {
  if (!is_gather(k.call)) return "the " + describe_object_call(k);
  return fmt::format("rank {}'s object in its {} {} over ranks {}", k.src, ordinal(k.n),
                     gather_name(k.call), format_ranks(k.group));
}

}  // namespace prism
