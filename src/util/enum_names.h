// Enum <-> name tables: each enum keeps one constexpr array of (value, name)
// pairs, and these two helpers search it.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>
#include <utility>

namespace prism::internal {

template <typename E, std::size_t N>
std::optional<E> parse_enum(std::string_view s,
                            const std::array<std::pair<E, std::string_view>, N>& table) {
  for (const auto& [e, name] : table)
    if (name == s) return e;
  return std::nullopt;
}

template <typename E, std::size_t N>
std::string_view enum_name(E e, const std::array<std::pair<E, std::string_view>, N>& table) {
  for (const auto& [v, name] : table)
    if (v == e) return name;
  return "?";
}

}  // namespace prism::internal
