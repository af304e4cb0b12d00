// Writing the canonical graph file. Layout of the text (docs/graph-format.md):
// the document and its top-level arrays are broken one element per line
// (slots, roles, assign entries, overrides), and each role's ops one op per
// line, so that a diff of two graphs reads op by op; everything smaller is
// written on one line as {"key": value, ...}.
#include <algorithm>
#include <string>

#include "graph/graph_json.h"
#include "graph/json_reader.h"
#include "graph/rank_list.h"
#include "graph/role_json.h"
#include "util/file.h"

namespace prism {
namespace graph_json {
namespace {

// One line, with a space after ':' and ','. Strings that are not valid UTF-8
// are written with U+FFFD in place of the bad bytes rather than failing.
void emit_inline(const Json& j, std::string* out) {
  if (j.is_object()) {
    *out += '{';
    bool first = true;
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (!first) *out += ", ";
      first = false;
      *out += Json(it.key()).dump(-1, ' ', false, Json::error_handler_t::replace);
      *out += ": ";
      emit_inline(it.value(), out);
    }
    *out += '}';
  } else if (j.is_array()) {
    *out += '[';
    for (std::size_t i = 0; i < j.size(); ++i) {
      if (i > 0) *out += ", ";
      emit_inline(j[i], out);
    }
    *out += ']';
  } else {
    *out += j.dump(-1, ' ', false, Json::error_handler_t::replace);
  }
}

std::string inline_text(const Json& j) {
  std::string s;
  emit_inline(j, &s);
  return s;
}

// `"key": [` + one element per line + `]`; `[]` when empty.
template <typename Emit>
void emit_list(std::string* out, std::string_view indent, std::string_view key, std::size_t n,
               Emit emit_item) {
  *out += indent;
  *out += '"';
  *out += key;
  *out += "\": [";
  if (n == 0) {
    *out += ']';
    return;
  }
  *out += '\n';
  for (std::size_t i = 0; i < n; ++i) {
    emit_item(i);
    *out += i + 1 < n ? ",\n" : "\n";
  }
  *out += indent;
  *out += ']';
}

Json layout_to_json(const Layout& layout) {
  Json dims = Json::array();
  for (const GridDim& d : layout.dims()) dims.push_back(Json{{"name", d.name}, {"size", d.size}});
  return Json{{"world_size", layout.world_size()},
              {"gpus_per_node", layout.gpus_per_node()},
              {"dims", std::move(dims)}};
}

Json slot_to_json(const CommSlot& s, const Layout& layout) {
  Json j{{"name", s.name}, {"kind", s.kind == CommSlot::Kind::kGroup ? "group" : "peer"}};
  if (s.kind == CommSlot::Kind::kGroup) {
    if (!s.explicit_groups.empty()) {
      j["groups"] = s.explicit_groups;
    } else {
      Json dims = Json::array();
      for (int d : s.dims) dims.push_back(element(layout.dims(), d).name);
      j["dims"] = std::move(dims);
    }
  } else if (!s.explicit_peers.empty()) {
    j["peers"] = s.explicit_peers;
  } else {
    j["dim"] = element(layout.dims(), s.peer_dim).name;
    j["offset"] = s.offset;
    if (s.wrap) j["wrap"] = true;
  }
  return j;
}

// The dependency finalize_graph() added to each event wait (its latest
// earlier record), per op; kNone elsewhere. Loading derives it again.
std::vector<std::int32_t> derived_deps(const Role& role) {
  std::vector<std::int32_t> out(role.ops.size(), kNone);
  std::vector<std::int32_t> last_record(role.events.size(), kNone);
  for (std::size_t i = 0; i < role.ops.size(); ++i) {
    const Op& op = role.ops[i];
    if (op.kind != OpKind::kEventRecord && op.kind != OpKind::kEventWait) continue;
    PRISM_CHECK(op.ref >= 0 && static_cast<std::size_t>(op.ref) < last_record.size(),
                "graph_to_json: event index out of range; was the graph validated?");
    if (op.kind == OpKind::kEventRecord) last_record[op.ref] = static_cast<std::int32_t>(i);
    if (op.kind == OpKind::kEventWait) out[i] = last_record[op.ref];
  }
  return out;
}

void emit_role(const Role& role, const std::vector<CommSlot>& slots, std::string* out) {
  Json head{{"name", role.name}, {"streams", role.streams}};
  if (!role.events.empty()) head["events"] = role.events;
  std::string text = inline_text(head);
  text.pop_back();  // reopen the object to append "ops"
  *out += "    " + text + ",\n";
  const std::vector<std::int32_t> skip = derived_deps(role);
  emit_list(out, "      ", "ops", role.ops.size(), [&](std::size_t i) {
    *out += "        ";
    emit_inline(op_to_json(role, i, slots, skip[i]), out);
  });
  *out += "\n    }";
}

// One "ranks" entry per role that has ranks, in role order.
void emit_assign(const ExecutionGraph& g, std::string* out) {
  std::vector<std::vector<Rank>> ranks_of_role(g.roles.size());
  for (Rank r = 0; r < static_cast<Rank>(g.role_of_rank.size()); ++r) {
    const std::int32_t role = g.role_of_rank[r];
    if (role == kNone) continue;
    PRISM_CHECK(role >= 0 && static_cast<std::size_t>(role) < g.roles.size(),
                "graph_to_json: role index out of range; was the graph validated?");
    ranks_of_role[role].push_back(r);
  }
  std::vector<std::size_t> assigned;
  for (std::size_t i = 0; i < g.roles.size(); ++i)
    if (!ranks_of_role[i].empty()) assigned.push_back(i);
  emit_list(out, "  ", "assign", assigned.size(), [&](std::size_t i) {
    const std::size_t role = assigned[i];
    *out += "    " + inline_text(Json{{"role", g.roles[role].name},
                                      {"ranks", format_rank_list(ranks_of_role[role])}});
  });
}

// A section of a layer above (graph_json.h's ExtraSection): its list, one
// item per line, after the graph's own sections.
void emit_extra(const ExtraSection& section, std::string* out) {
  PRISM_CHECK(
      std::find(kExtraSections.begin(), kExtraSections.end(), section.key) != kExtraSections.end(),
      "graph_to_json: a section the graph file does not have");
  const Json items = Json::parse(section.json, nullptr, /*allow_exceptions=*/false);
  PRISM_CHECK(items.is_array(), "graph_to_json: an extra section that is not a JSON list");
  emit_list(out, "  ", section.key, items.size(), [&](std::size_t i) {
    *out += "    ";
    emit_inline(items[i], out);
  });
}

}  // namespace
}  // namespace graph_json

std::string graph_to_json(const ExecutionGraph& g, const std::vector<ExtraSection>& extra) {
  using graph_json::inline_text;
  std::string out = "{\n";
  out += "  \"format\": \"" + std::string(graph_json::kFormatName) + "\",\n";
  out += "  \"version\": " + std::to_string(kGraphFormatVersion) + ",\n";
  if (!g.name.empty()) out += "  \"name\": " + inline_text(graph_json::Json(g.name)) + ",\n";
  if (!g.cluster.empty())
    out += "  \"cluster\": " + inline_text(graph_json::Json(g.cluster)) + ",\n";
  out += "  \"layout\": " + inline_text(graph_json::layout_to_json(g.layout)) + ",\n";
  graph_json::emit_list(&out, "  ", "slots", g.slots.size(), [&](std::size_t i) {
    out += "    " + inline_text(graph_json::slot_to_json(g.slots[i], g.layout));
  });
  out += ",\n";
  graph_json::emit_list(&out, "  ", "roles", g.roles.size(),
                        [&](std::size_t i) { graph_json::emit_role(g.roles[i], g.slots, &out); });
  out += ",\n";
  graph_json::emit_assign(g, &out);
  if (!g.overrides.empty()) {
    out += ",\n";
    graph_json::emit_list(&out, "  ", "overrides", g.overrides.size(), [&](std::size_t i) {
      const RankOverride& o = g.overrides[i];
      const double scale = static_cast<double>(o.compute_scale_ppm) / 1e6;
      out += "    " + inline_text(graph_json::Json{{"rank", o.rank}, {"compute_scale", scale}});
    });
  }
  for (const ExtraSection& section : extra) {
    out += ",\n";
    graph_json::emit_extra(section, &out);
  }
  out += "\n}\n";
  return out;
}

Status save_graph(const ExecutionGraph& g, const std::string& path,
                  const std::vector<ExtraSection>& extra) {
  return write_file_atomic(path, graph_to_json(g, extra));
}

}  // namespace prism
