#include "runtime/split_color.h"

#include <algorithm>

#include "util/check.h"

namespace prism::runtime {

std::int32_t torch_split_color(std::span<const std::int32_t> ranks) {
  // CPython's tuplehash for a 64-bit Py_uhash_t: xxHash's primes and round.
  constexpr std::uint64_t kPrime1 = 11400714785074694791ull;
  constexpr std::uint64_t kPrime2 = 14029467366897019727ull;
  constexpr std::uint64_t kPrime5 = 2870177450012600261ull;
  std::uint64_t acc = kPrime5;
  for (const std::int32_t r : ranks) {
    // hash(int) is the int itself for 0 <= r < 2**61 - 1; hash(-1) is -2.
    const std::int64_t lane = r == -1 ? -2 : r;
    acc += static_cast<std::uint64_t>(lane) * kPrime2;
    acc = (acc << 31) | (acc >> 33);
    acc *= kPrime1;
  }
  acc += static_cast<std::uint64_t>(ranks.size()) ^ (kPrime5 ^ 3527539ull);
  if (acc == ~std::uint64_t{0}) acc = 1546275796;  // -1 is no hash
  // abs() of the signed hash, then modulo 2**31.
  const std::uint64_t magnitude = static_cast<std::int64_t>(acc) < 0 ? 0 - acc : acc;
  return static_cast<std::int32_t>(magnitude % (std::uint64_t{1} << 31));
}

std::int32_t torch_split_group_color(std::span<const std::int32_t> group,
                                     std::span<const std::int32_t> parent) {
  // Parents are in ascending order but for a program's own communicators.
  const bool sorted = std::is_sorted(parent.begin(), parent.end());
  std::int32_t lowest = -1;
  for (const std::int32_t r : group) {
    auto at = sorted ? std::lower_bound(parent.begin(), parent.end(), r)
                     : std::find(parent.begin(), parent.end(), r);
    if (at == parent.end() || *at != r) return -1;
    const auto position = static_cast<std::int32_t>(at - parent.begin());
    if (lowest < 0 || position < lowest) lowest = position;
  }
  return lowest;
}

std::vector<MeshGroup> mesh_groups_of(std::span<const std::int32_t> members, int position) {
  const int n = static_cast<int>(members.size());
  PRISM_CHECK(position >= 0 && position < n, "a mesh group of a rank outside the parent");
  std::vector<MeshGroup> out;
  out.push_back(MeshGroup{1, 1, {members[static_cast<std::size_t>(position)]}});
  // A group of two or more ranks fixes its stride, size and base, so no two
  // pairs (t, s) give one group; size 1 is the rank alone whatever t is.
  for (int t = 1; t <= n / 2; ++t) {
    if (n % t != 0) continue;
    for (int s = 2; t * s <= n; ++s) {
      const int block = t * s;
      if (n % block != 0) continue;
      const int base = position / block * block + position % t;
      MeshGroup g{t, s, {}};
      g.ranks.reserve(static_cast<std::size_t>(s));
      for (int i = 0; i < s; ++i)
        g.ranks.push_back(members[static_cast<std::size_t>(base + i * t)]);
      std::sort(g.ranks.begin(), g.ranks.end());
      out.push_back(std::move(g));
    }
  }
  return out;
}

std::vector<std::vector<std::int32_t>> grid_groups_of(const Layout& layout, Rank rank) {
  std::vector<std::vector<std::int32_t>> out;
  for (int d = static_cast<int>(layout.dims().size()) - 1; d >= 0; --d) {
    const int size = layout.dims()[static_cast<std::size_t>(d)].size;
    if (size < 2) continue;
    const Rank first = rank - layout.coord(rank, d) * layout.stride(d);
    std::vector<std::int32_t> g;
    g.reserve(static_cast<std::size_t>(size));
    for (int c = 0; c < size; ++c) g.push_back(first + c * layout.stride(d));
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace prism::runtime
