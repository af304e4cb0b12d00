#include "chakra/comm_groups.h"

#include <algorithm>
#include <charconv>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/json_depth.h"
#include "util/text_error.h"

namespace prism::chakra {
namespace {

// Numeric ids first, in numeric order, then any others by name.
bool id_less(const std::string& a, const std::string& b) {
  auto number = [](const std::string& s) {
    long long v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    const bool ok = ec == std::errc() && end == s.data() + s.size() && !s.empty();
    return std::make_tuple(!ok, ok ? v : 0);
  };
  return std::tuple_cat(number(a), std::tie(a)) < std::tuple_cat(number(b), std::tie(b));
}

}  // namespace

std::string write_comm_groups(const std::vector<std::vector<Rank>>& groups) {
  std::string out = "{";
  for (std::size_t i = 0; i < groups.size(); ++i) {
    out += fmt::format("{}\n  \"{}\": [{}]", i == 0 ? "" : ",", i + 1, fmt::join(groups[i], ", "));
  }
  out += groups.empty() ? "}\n" : "\n}\n";
  return out;
}

Result<std::vector<CommGroup>> parse_comm_groups(std::string_view json, int world_size,
                                                 const std::string& source) {
  PRISM_RETURN_IF_ERROR(check_json_depth(json, source));
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(json);
  } catch (const nlohmann::json::parse_error& e) {
    return json_syntax_error(json, source, e.byte, e.what());
  } catch (const nlohmann::json::exception& e) {  // a number too large for a double (1e400)
    return json_value_error(source, e.id, e.what());
  }
  if (!doc.is_object()) {
    return Status::invalid_argument(
        fmt::format("{}: not a JSON object of group id -> ranks", source));
  }
  std::vector<CommGroup> out;
  for (const auto& [id, ranks] : doc.items()) {
    const std::string where = fmt::format("{}: group \"{}\"", source, id);
    if (!ranks.is_array() || ranks.empty())
      return Status::invalid_argument(fmt::format("{}: not a non-empty list of ranks", where));
    CommGroup g{id, {}};
    std::set<Rank> seen;
    for (const nlohmann::json& r : ranks) {
      if (!r.is_number_integer() || r.get<long long>() < 0 || r.get<long long>() >= world_size) {
        return Status::invalid_argument(
            fmt::format("{}: {} is not a rank of the {} traces", where, r.dump(), world_size));
      }
      const auto rank = r.get<Rank>();
      if (!seen.insert(rank).second)
        return Status::invalid_argument(fmt::format("{}: rank {} listed twice", where, rank));
      g.members.push_back(rank);
    }
    out.push_back(std::move(g));
  }
  std::sort(out.begin(), out.end(),
            [](const CommGroup& a, const CommGroup& b) { return id_less(a.id, b.id); });
  return out;
}

}  // namespace prism::chakra
