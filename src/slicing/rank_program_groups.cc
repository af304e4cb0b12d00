#include "slicing/rank_program_groups.h"

#include <algorithm>
#include <bit>
#include <functional>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace prism::rank_program_internal {

KeyGroups::KeyGroups(std::string key, int world_size)
    : key_(std::move(key)),
      world_size_(world_size),
      group_of_(static_cast<std::size_t>(world_size), kNone) {}

std::string describe_members(const std::vector<Rank>& members) {
  constexpr std::size_t kShown = 16;
  std::vector<Rank> head(members.begin(), members.begin() + static_cast<std::ptrdiff_t>(
                                                                std::min(members.size(), kShown)));
  return fmt::format("[{}{}]", fmt::join(head, ","), members.size() > kShown ? ",..." : "");
}

Status KeyGroups::add(Rank rank, const std::vector<Rank>& members, const std::string& where) {
  const std::string comm = fmt::format("{}: communicator '{}'", where, key_);
  for (Rank m : members) {
    if (m < 0 || m >= world_size_) {
      return Status::invalid_argument(
          fmt::format("{} lists rank {}, outside the world of {}", comm, m, world_size_));
    }
  }
  if (std::find(members.begin(), members.end(), rank) == members.end()) {
    return Status::invalid_argument(fmt::format("{} has members {}, which do not include rank {}",
                                                comm, describe_members(members), rank));
  }
  const std::int32_t known = group_of_[rank];
  if (known != kNone) {
    // An earlier report put this rank in a group: it must report the same.
    if (groups_[known] == members) return Status::ok();
    return Status::invalid_argument(fmt::format(
        "{} has members {}, but rank {} reports that group as {}: members of a communicator "
        "must list the same ranks in the same order",
        comm, describe_members(members), reporter_[known], describe_members(groups_[known])));
  }
  const auto g = static_cast<std::int32_t>(groups_.size());
  for (Rank m : members) {
    const std::int32_t prev = group_of_[m];
    if (prev == g) {
      return Status::invalid_argument(fmt::format("{} lists rank {} twice", comm, m));
    }
    if (prev != kNone) {
      return Status::invalid_argument(fmt::format(
          "{} has members {}, but rank {} reports rank {} in the group {}: a rank is "
          "in one group of a communicator",
          comm, describe_members(members), reporter_[prev], m, describe_members(groups_[prev])));
    }
    group_of_[m] = g;
  }
  groups_.push_back(members);
  reporter_.push_back(rank);
  return Status::ok();
}

namespace {

constexpr std::uint64_t kMul = 0x9E3779B97F4A7C15ull;

std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
  h = (h ^ v) * kMul;
  return h ^ (h >> 29);
}

std::uint64_t mix_string(std::uint64_t h, std::string_view s) {
  return mix(h, std::hash<std::string_view>{}(s));
}

// The op packed into a few words (every field that same_op compares).
std::uint64_t op_hash(std::uint64_t h, const Op& op) {
  const std::uint64_t small =
      static_cast<std::uint64_t>(op.kind) | static_cast<std::uint64_t>(op.collective) << 8 |
      static_cast<std::uint64_t>(op.dtype) << 16 | static_cast<std::uint64_t>(op.marker) << 24 |
      static_cast<std::uint64_t>(op.stream) << 32 | static_cast<std::uint64_t>(op.transport) << 48;
  h = mix(h, small);
  h = mix(h, static_cast<std::uint32_t>(op.ref) | std::uint64_t{static_cast<std::uint32_t>(op.arg)}
                                                      << 32);
  h = mix(h, static_cast<std::uint32_t>(op.name) |
                 std::uint64_t{static_cast<std::uint32_t>(op.cost)} << 32);
  h = mix(h, op.group | std::uint64_t{op.deps_end - op.deps_begin} << 32);
  h = mix(h, static_cast<std::uint64_t>(op.duration.ns));
  return mix(h, static_cast<std::uint64_t>(op.bytes.count));
}

bool same_op(const Op& a, const Op& b) {
  return a.kind == b.kind && a.collective == b.collective && a.dtype == b.dtype &&
         a.marker == b.marker && a.stream == b.stream && a.ref == b.ref && a.arg == b.arg &&
         a.name == b.name && a.cost == b.cost && a.group == b.group && a.transport == b.transport &&
         a.deps_begin == b.deps_begin && a.deps_end == b.deps_end && a.duration == b.duration &&
         a.bytes == b.bytes;
}

bool same_cost(const KernelCost& a, const KernelCost& b) {
  return a.kernel_class == b.kernel_class && a.flops == b.flops &&
         a.bytes_accessed == b.bytes_accessed;
}

}  // namespace

std::uint64_t role_hash(const Role& role) {
  std::uint64_t h = mix(0, role.ops.size());
  for (const std::string& s : role.streams) h = mix_string(h, s);
  h = mix(h, role.events.size());
  for (const std::string& s : role.events) h = mix_string(h, s);
  h = mix(h, role.names.size());
  for (const std::string& s : role.names) h = mix_string(h, s);
  for (const KernelCost& c : role.costs) {
    // 0.0 and -0.0 compare equal, so they must hash equally.
    const double flops = c.flops == 0 ? 0.0 : c.flops;
    h = mix(h, static_cast<std::uint64_t>(c.kernel_class));
    h = mix(h, std::bit_cast<std::uint64_t>(flops));
    h = mix(h, static_cast<std::uint64_t>(c.bytes_accessed.count));
  }
  for (const Op& op : role.ops) h = op_hash(h, op);
  for (std::int32_t d : role.deps) h = mix(h, static_cast<std::uint32_t>(d));
  return h;
}

bool same_program(const Role& a, const Role& b) {
  return a.streams == b.streams && a.events == b.events && a.names == b.names && a.deps == b.deps &&
         std::equal(a.costs.begin(), a.costs.end(), b.costs.begin(), b.costs.end(), same_cost) &&
         std::equal(a.ops.begin(), a.ops.end(), b.ops.begin(), b.ops.end(), same_op);
}

}  // namespace prism::rank_program_internal
