#include "slicing/graph_objects.h"

#include <algorithm>
#include <cstdint>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "slicing/capture_objects.h"
#include "util/file.h"

namespace prism {
namespace {

using Json = nlohmann::json;

const ExtraSection* find_section(const std::vector<ExtraSection>& sections, std::string_view key) {
  for (const ExtraSection& s : sections) {
    if (s.key == key) return &s;
  }
  return nullptr;
}

std::string role_names(const ExecutionGraph& g) {
  std::string out;
  for (const Role& r : g.roles) out += (out.empty() ? "" : ", ") + r.name;
  return out;
}

// Entry `i` of "captured": {"rank": R, "role": NAME}, into out->captured.
Status read_captured_entry(const ExecutionGraph& g, const Json& e, std::size_t i,
                           const std::string& source, GraphObjects* out) {
  const auto fail = [&](const std::string& why) {
    return Status::invalid_argument(fmt::format("{}: captured {}: {}", source, i, why));
  };
  if (!e.is_object()) return fail("not an object {\"rank\": R, \"role\": NAME}");
  for (const auto& [key, value] : e.items()) {
    if (key != "rank" && key != "role") return fail(fmt::format("unknown field \"{}\"", key));
  }
  if (!e.contains("role") || !e["role"].is_string()) return fail("no \"role\" string");
  const std::string name = e["role"].get<std::string>();
  const int role = g.find_role(name);
  if (role < 0) return fail(fmt::format("unknown role \"{}\" (roles: {})", name, role_names(g)));
  Rank& captured = out->captured[static_cast<std::size_t>(role)];
  if (captured != kNone) return fail(fmt::format("role \"{}\" is listed twice", name));
  if (!e.contains("rank") || !e["rank"].is_number_integer()) return fail("no \"rank\" integer");
  const Json& rank = e["rank"];
  const bool in_range =
      rank.is_number_unsigned()
          ? rank.get<std::uint64_t>() < static_cast<std::uint64_t>(g.world_size())
          : rank.get<std::int64_t>() >= 0 && rank.get<std::int64_t>() < g.world_size();
  if (!in_range)
    return fail(fmt::format("rank {} of role \"{}\" is not a rank of the graph (0 to {})",
                            rank.dump(), name, g.world_size() - 1));
  captured = static_cast<Rank>(rank.get<std::int64_t>());
  return Status::ok();
}

}  // namespace

std::vector<ExtraSection> graph_object_sections(const ExecutionGraph& g, const GraphObjects& o) {
  PRISM_CHECK(o.captured.size() == g.roles.size(), "graph_object_sections: one rank per role");
  Json captured = Json::array();
  for (std::size_t role = 0; role < g.roles.size(); ++role) {
    if (o.captured[role] != kNone)
      captured.push_back({{"role", g.roles[role].name}, {"rank", o.captured[role]}});
  }
  std::vector<const CapturedObject*> by_key;
  for (const CapturedObject& object : o.objects) by_key.push_back(&object);
  std::sort(by_key.begin(), by_key.end(),
            [](const CapturedObject* a, const CapturedObject* b) { return a->key < b->key; });
  Json objects = Json::array();
  for (const CapturedObject* object : by_key) objects.push_back(capture_objects::to_json(*object));
  return {{"captured", captured.dump()}, {"objects", objects.dump()}};
}

Result<std::optional<GraphObjects>> read_graph_objects(const ExecutionGraph& g,
                                                       const std::vector<ExtraSection>& sections,
                                                       const std::string& source) {
  const ExtraSection* captured = find_section(sections, "captured");
  const ExtraSection* objects = find_section(sections, "objects");
  if (captured == nullptr) {
    if (objects == nullptr) return std::optional<GraphObjects>();
    return Status::invalid_argument(fmt::format(
        "{}: \"objects\" without \"captured\": which rank's capture each role runs is not "
        "known, so no object can be placed",
        source));
  }
  const Json list = Json::parse(captured->json, nullptr, /*allow_exceptions=*/false);
  if (!list.is_array())
    return Status::invalid_argument(fmt::format("{}: \"captured\" is not a list", source));
  GraphObjects out;
  out.captured.assign(g.roles.size(), kNone);
  for (std::size_t i = 0; i < list.size(); ++i)
    PRISM_RETURN_IF_ERROR(read_captured_entry(g, list[i], i, source, &out));
  if (objects != nullptr) {
    Json doc = Json::object();
    doc["objects"] = Json::parse(objects->json, nullptr, /*allow_exceptions=*/false);
    PRISM_ASSIGN_OR_RETURN(out.objects, capture_objects::read(doc, source));
  }
  std::set<std::string> keys;
  for (std::size_t i = 0; i < out.objects.size(); ++i) {
    if (!keys.insert(out.objects[i].key).second)
      return Status::invalid_argument(
          fmt::format("{}: object {}: \"{}\" is given twice", source, i, out.objects[i].key));
  }
  std::sort(out.objects.begin(), out.objects.end(),
            [](const CapturedObject& a, const CapturedObject& b) { return a.key < b.key; });
  return std::optional<GraphObjects>(std::move(out));
}

Result<GraphWithObjects> parse_graph_with_objects(std::string_view text,
                                                  const std::string& source) {
  std::vector<ExtraSection> sections;
  GraphWithObjects out;
  PRISM_ASSIGN_OR_RETURN(out.graph, parse_graph_json(text, source, &sections));
  PRISM_ASSIGN_OR_RETURN(out.objects, read_graph_objects(out.graph, sections, source));
  return out;
}

Result<GraphWithObjects> load_graph_with_objects(const std::string& path) {
  PRISM_ASSIGN_OR_RETURN(const std::string text, read_file(path));
  return parse_graph_with_objects(text, path);
}

}  // namespace prism
