#include "graph/rank_list.h"

#include <algorithm>
#include <charconv>
#include <cstdint>

#include <fmt/format.h>

namespace prism {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

Result<Rank> parse_rank(std::string_view s, int world_size) {
  s = trim(s);
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size())
    return Status::invalid_argument(fmt::format("\"{}\" is not a rank", s));
  if (v < 0 || v >= world_size)
    return Status::invalid_argument(fmt::format("rank {} is outside [0, {})", v, world_size));
  return static_cast<Rank>(v);
}

}  // namespace

Result<std::vector<Rank>> parse_rank_list(std::string_view text, int world_size) {
  std::vector<Rank> out;
  if (trim(text).empty()) return Status::invalid_argument("empty rank list");
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view item = text.substr(pos, comma - pos);
    const std::size_t dash = item.find('-');
    PRISM_ASSIGN_OR_RETURN(Rank first, parse_rank(item.substr(0, dash), world_size));
    Rank last = first;
    if (dash != std::string_view::npos) {
      PRISM_ASSIGN_OR_RETURN(last, parse_rank(item.substr(dash + 1), world_size));
      if (last < first)
        return Status::invalid_argument(fmt::format("range \"{}\" is reversed", trim(item)));
    }
    for (Rank r = first; r <= last; ++r) out.push_back(r);
    pos = comma + 1;
  }
  std::sort(out.begin(), out.end());
  auto dup = std::adjacent_find(out.begin(), out.end());
  if (dup != out.end())
    return Status::invalid_argument(fmt::format("rank {} is listed twice", *dup));
  return out;
}

std::string format_rank_list(const std::vector<Rank>& ranks) {
  std::string out;
  std::size_t i = 0;
  while (i < ranks.size()) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(ranks[i]);
    if (j > i) out += fmt::format("-{}", ranks[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace prism
