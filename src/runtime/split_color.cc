#include "runtime/split_color.h"

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

}  // namespace prism::runtime
