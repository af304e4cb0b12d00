// Reading the graph file: the document frame, layout, slots, rank
// assignment and overrides (roles and ops are in role_json.cc).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <system_error>

#include <fmt/format.h>

#include "graph/graph_json.h"
#include "graph/json_reader.h"
#include "graph/rank_list.h"
#include "graph/role_json.h"
#include "graph/validate.h"
#include "util/file.h"
#include "util/text_error.h"
#include "util/units.h"

namespace prism {
namespace graph_json {
namespace {

constexpr std::int64_t kMaxI32 = std::numeric_limits<std::int32_t>::max();
// The world the loader accepts, as job specs do (cluster.num_gpus): every
// per-rank table is sized by it, so a 300-byte file declaring 10^9 ranks
// would ask for gigabytes before anything else is read.
constexpr std::int64_t kMaxWorld = std::int64_t{1} << 22;
constexpr int kDefaultGpusPerNode = 8;

Status read_header(const Json& doc, const JsonPath& root) {
  PRISM_RETURN_IF_ERROR(expect_object(doc, root));
  const Json* format = find_field(doc, "format");
  if (format == nullptr || !format->is_string() || format->get<std::string>() != kFormatName) {
    return root.error(fmt::format("not a prism graph: expected \"format\": \"{}\"", kFormatName));
  }
  PRISM_ASSIGN_OR_RETURN(std::int64_t version, get_int(doc, "version", root, 0, kMaxI32));
  if (version != kGraphFormatVersion) {
    return root.field("version").error(fmt::format(
        "unsupported version {} (this build reads version {})", version, kGraphFormatVersion));
  }
  return check_fields(doc, root,
                      {"format", "version", "name", "cluster", "layout", "slots", "roles", "assign",
                       "overrides", kExtraSections[0], kExtraSections[1]});
}

Result<GridDim> read_dim(const Json& j, const JsonPath& path) {
  PRISM_RETURN_IF_ERROR(check_fields(j, path, {"name", "size"}));
  GridDim d;
  PRISM_ASSIGN_OR_RETURN(d.name, get_string(j, "name", path));
  PRISM_ASSIGN_OR_RETURN(std::int64_t size, get_int(j, "size", path, 1, kMaxI32));
  d.size = static_cast<int>(size);
  return d;
}

Result<Layout> read_layout(const Json& j, const JsonPath& path) {
  PRISM_RETURN_IF_ERROR(check_fields(j, path, {"world_size", "gpus_per_node", "dims"}));
  PRISM_ASSIGN_OR_RETURN(std::int64_t world, get_int(j, "world_size", path, 1, kMaxWorld));
  PRISM_ASSIGN_OR_RETURN(std::int64_t gpn,
                         get_int_or(j, "gpus_per_node", path, 1, kMaxI32, kDefaultGpusPerNode));
  std::vector<GridDim> dims;
  const Json* jd = find_field(j, "dims");
  if (jd == nullptr) {
    dims.push_back(GridDim{"rank", static_cast<int>(world)});
  } else {
    const JsonPath at = path.field("dims");
    PRISM_RETURN_IF_ERROR(expect_array(*jd, at));
    std::int64_t product = 1;
    for (std::size_t i = 0; i < jd->size(); ++i) {
      PRISM_ASSIGN_OR_RETURN(GridDim d, read_dim((*jd)[i], at.item(i)));
      product = std::min<std::int64_t>(product * d.size, kMaxI32 + 1);
      dims.push_back(std::move(d));
    }
    // Checked here, before Layout computes strides in int.
    if (product != world) {
      return at.error(fmt::format(
          "the product of the dim sizes ({}) must equal world_size ({})",
          product > kMaxI32 ? std::string("overflow") : std::to_string(product), world));
    }
  }
  return Layout(static_cast<int>(world), std::move(dims), static_cast<int>(gpn));
}

Result<int> read_dim_ref(const Json& j, const JsonPath& path, const Layout& layout) {
  PRISM_ASSIGN_OR_RETURN(std::string name, as_string(j, path));
  const int d = layout.find_dim(name);
  if (d < 0) {
    std::string known;
    for (const GridDim& g : layout.dims()) known += (known.empty() ? "" : ", ") + g.name;
    return path.error(fmt::format("unknown dim \"{}\" (layout dims: {})", name, known));
  }
  return d;
}

Status read_group_slot(const Json& j, const JsonPath& path, const Layout& layout, CommSlot* s) {
  PRISM_RETURN_IF_ERROR(check_fields(j, path, {"name", "kind", "dims", "groups"}));
  const Json* dims = find_field(j, "dims");
  const Json* groups = find_field(j, "groups");
  if ((dims == nullptr) == (groups == nullptr))
    return path.error("a group slot needs exactly one of \"dims\" and \"groups\"");
  if (dims != nullptr) {
    const JsonPath at = path.field("dims");
    PRISM_RETURN_IF_ERROR(expect_array(*dims, at));
    for (std::size_t i = 0; i < dims->size(); ++i) {
      PRISM_ASSIGN_OR_RETURN(int d, read_dim_ref((*dims)[i], at.item(i), layout));
      s->dims.push_back(d);
    }
    return Status::ok();
  }
  const JsonPath at = path.field("groups");
  PRISM_RETURN_IF_ERROR(expect_array(*groups, at));
  if (groups->empty()) return at.error("must list at least one group");
  for (std::size_t g = 0; g < groups->size(); ++g) {
    const JsonPath gp = at.item(g);
    PRISM_RETURN_IF_ERROR(expect_array((*groups)[g], gp));
    if ((*groups)[g].empty()) return gp.error("a group needs at least one rank");
    std::vector<Rank> members;
    for (std::size_t i = 0; i < (*groups)[g].size(); ++i) {
      PRISM_ASSIGN_OR_RETURN(std::int64_t r,
                             as_int((*groups)[g][i], gp.item(i), 0, layout.world_size() - 1));
      members.push_back(static_cast<Rank>(r));
    }
    s->explicit_groups.push_back(std::move(members));
  }
  return Status::ok();
}

Status read_peer_slot(const Json& j, const JsonPath& path, const Layout& layout, CommSlot* s) {
  PRISM_RETURN_IF_ERROR(check_fields(j, path, {"name", "kind", "dim", "offset", "wrap", "peers"}));
  const Json* peers = find_field(j, "peers");
  if (peers == nullptr) {
    PRISM_ASSIGN_OR_RETURN(const Json* dim, require_field(j, "dim", path));
    PRISM_ASSIGN_OR_RETURN(s->peer_dim, read_dim_ref(*dim, path.field("dim"), layout));
    PRISM_ASSIGN_OR_RETURN(std::int64_t off, get_int(j, "offset", path, -kMaxI32, kMaxI32));
    if (off == 0) return path.field("offset").error("must not be 0");
    s->offset = static_cast<int>(off);
    if (const Json* wrap = find_field(j, "wrap")) {
      PRISM_ASSIGN_OR_RETURN(s->wrap, as_bool(*wrap, path.field("wrap")));
    }
    return Status::ok();
  }
  if (find_field(j, "dim") || find_field(j, "offset") || find_field(j, "wrap"))
    return path.error("a peer slot has either \"peers\" or \"dim\"/\"offset\"/\"wrap\", not both");
  const JsonPath at = path.field("peers");
  PRISM_RETURN_IF_ERROR(expect_array(*peers, at));
  if (peers->size() != static_cast<std::size_t>(layout.world_size())) {
    return at.error(fmt::format("must list one peer per rank: {} entries for world_size {}",
                                peers->size(), layout.world_size()));
  }
  for (std::size_t r = 0; r < peers->size(); ++r) {
    PRISM_ASSIGN_OR_RETURN(std::int64_t p,
                           as_int((*peers)[r], at.item(r), -1, layout.world_size() - 1));
    if (p == static_cast<std::int64_t>(r)) return at.item(r).error("a rank cannot be its own peer");
    s->explicit_peers.push_back(static_cast<Rank>(p));
  }
  return Status::ok();
}

Result<CommSlot> read_slot(const Json& j, const JsonPath& path, const Layout& layout) {
  PRISM_RETURN_IF_ERROR(expect_object(j, path));
  CommSlot s;
  PRISM_ASSIGN_OR_RETURN(s.name, get_string(j, "name", path));
  PRISM_ASSIGN_OR_RETURN(std::string kind, get_string(j, "kind", path));
  if (kind == "group") {
    s.kind = CommSlot::Kind::kGroup;
    PRISM_RETURN_IF_ERROR(read_group_slot(j, path, layout, &s));
  } else if (kind == "peer") {
    s.kind = CommSlot::Kind::kPeer;
    PRISM_RETURN_IF_ERROR(read_peer_slot(j, path, layout, &s));
  } else {
    return path.field("kind").error(
        fmt::format("unknown slot kind \"{}\" (valid: group, peer)", kind));
  }
  return s;
}

// The ranks an assign entry matches: a rank list, or a grid coordinate match.
Result<std::vector<Rank>> read_assign_ranks(const Json& j, const JsonPath& path,
                                            const Layout& layout) {
  const Json* ranks = find_field(j, "ranks");
  const Json* where = find_field(j, "where");
  if ((ranks == nullptr) == (where == nullptr))
    return path.error("an assign entry needs exactly one of \"ranks\" and \"where\"");
  if (ranks != nullptr) {
    const JsonPath at = path.field("ranks");
    PRISM_ASSIGN_OR_RETURN(std::string text, as_string(*ranks, at));
    Result<std::vector<Rank>> list = parse_rank_list(text, layout.world_size());
    if (!list.is_ok()) return at.error(list.status().message());
    return list;
  }
  const JsonPath at = path.field("where");
  PRISM_RETURN_IF_ERROR(expect_object(*where, at));
  std::vector<std::pair<int, int>> match;  // (dim, coord)
  for (const auto& [key, value] : where->items()) {
    const JsonPath kp = at.field(key);
    const int d = layout.find_dim(key);
    if (d < 0) return kp.error(fmt::format("unknown dim \"{}\"", key));
    PRISM_ASSIGN_OR_RETURN(std::int64_t c, as_int(value, kp, 0, layout.dims()[d].size - 1));
    match.emplace_back(d, static_cast<int>(c));
  }
  std::vector<Rank> out;
  for (Rank r = 0; r < layout.world_size(); ++r) {
    bool ok = true;
    for (auto [d, c] : match) ok = ok && layout.coord(r, d) == c;
    if (ok) out.push_back(r);
  }
  return out;
}

Status read_assign(const Json& arr, const JsonPath& path, ExecutionGraph* g) {
  PRISM_RETURN_IF_ERROR(expect_array(arr, path));
  g->role_of_rank.assign(g->world_size(), kNone);
  std::vector<std::int32_t> entry_of_rank(g->world_size(), kNone);
  for (std::size_t e = 0; e < arr.size(); ++e) {
    const JsonPath ep = path.item(e);
    PRISM_RETURN_IF_ERROR(check_fields(arr[e], ep, {"role", "ranks", "where"}));
    PRISM_ASSIGN_OR_RETURN(std::string name, get_string(arr[e], "role", ep));
    const int role = g->find_role(name);
    if (role < 0) return ep.field("role").error(fmt::format("unknown role \"{}\"", name));
    PRISM_ASSIGN_OR_RETURN(std::vector<Rank> ranks, read_assign_ranks(arr[e], ep, g->layout));
    for (Rank r : ranks) {
      if (g->role_of_rank[r] != kNone) {
        return ep.error(fmt::format(
            "rank {} is assigned to role '{}' here but already to role "
            "'{}' by {}",
            r, name, g->roles[g->role_of_rank[r]].name, path.item(entry_of_rank[r]).str()));
      }
      g->role_of_rank[r] = role;
      entry_of_rank[r] = static_cast<std::int32_t>(e);
    }
  }
  return Status::ok();
}

Status read_overrides(const Json& arr, const JsonPath& path, ExecutionGraph* g) {
  PRISM_RETURN_IF_ERROR(expect_array(arr, path));
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const JsonPath ip = path.item(i);
    PRISM_RETURN_IF_ERROR(check_fields(arr[i], ip, {"rank", "compute_scale"}));
    RankOverride o;
    PRISM_ASSIGN_OR_RETURN(std::int64_t r, get_int(arr[i], "rank", ip, 0, g->world_size() - 1));
    o.rank = static_cast<Rank>(r);
    PRISM_ASSIGN_OR_RETURN(const Json* scale, require_field(arr[i], "compute_scale", ip));
    const JsonPath sp = ip.field("compute_scale");
    PRISM_ASSIGN_OR_RETURN(double s, as_number(*scale, sp));
    if (!std::isfinite(s) || s <= 0) return sp.error("must be a number > 0");
    if (s * 1e6 > static_cast<double>(kMaxComputeScalePpm)) {
      return sp.error(
          fmt::format("{} exceeds the limit of {} (a straggler at most 1000 times slower)", s,
                      static_cast<double>(kMaxComputeScalePpm) / 1e6));
    }
    o.compute_scale_ppm = std::llround(s * 1e6);
    if (o.compute_scale_ppm <= 0) return sp.error("rounds to 0 parts per million; must be > 0");
    g->overrides.push_back(o);
  }
  std::stable_sort(g->overrides.begin(), g->overrides.end(),
                   [](const RankOverride& a, const RankOverride& b) { return a.rank < b.rank; });
  for (std::size_t i = 1; i < g->overrides.size(); ++i) {
    if (g->overrides[i].rank == g->overrides[i - 1].rank)
      return path.error(fmt::format("rank {} has two overrides", g->overrides[i].rank));
  }
  return Status::ok();
}

Status read_roles(const Json& arr, const JsonPath& path, ExecutionGraph* g) {
  PRISM_RETURN_IF_ERROR(expect_array(arr, path));
  g->roles.resize(arr.size());
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const JsonPath rp = path.item(i);
    PRISM_RETURN_IF_ERROR(read_role(arr[i], rp, g->slots, &g->roles[i]));
  }
  return Status::ok();
}

Status read_graph(const Json& doc, ExecutionGraph* g) {
  const JsonPath root;
  PRISM_RETURN_IF_ERROR(read_header(doc, root));
  PRISM_ASSIGN_OR_RETURN(g->name, get_string_or(doc, "name", root, ""));
  PRISM_ASSIGN_OR_RETURN(g->cluster, get_string_or(doc, "cluster", root, ""));
  PRISM_ASSIGN_OR_RETURN(const Json* layout, require_field(doc, "layout", root));
  PRISM_ASSIGN_OR_RETURN(g->layout, read_layout(*layout, root.field("layout")));
  if (const Json* slots = find_field(doc, "slots")) {
    const JsonPath sp = root.field("slots");
    PRISM_RETURN_IF_ERROR(expect_array(*slots, sp));
    for (std::size_t i = 0; i < slots->size(); ++i) {
      PRISM_ASSIGN_OR_RETURN(CommSlot s, read_slot((*slots)[i], sp.item(i), g->layout));
      g->slots.push_back(std::move(s));
    }
  }
  PRISM_ASSIGN_OR_RETURN(const Json* roles, require_field(doc, "roles", root));
  PRISM_RETURN_IF_ERROR(read_roles(*roles, root.field("roles"), g));
  PRISM_ASSIGN_OR_RETURN(const Json* assign, require_field(doc, "assign", root));
  PRISM_RETURN_IF_ERROR(read_assign(*assign, root.field("assign"), g));
  if (const Json* overrides = find_field(doc, "overrides"))
    PRISM_RETURN_IF_ERROR(read_overrides(*overrides, root.field("overrides"), g));
  return Status::ok();
}

}  // namespace
}  // namespace graph_json

Result<ExecutionGraph> parse_graph_json(std::string_view text, std::string_view source_name,
                                        std::vector<ExtraSection>* extra) {
  using graph_json::Json;
  const std::string source = source_name.empty() ? "graph" : std::string(source_name);
  ExecutionGraph g;
  std::vector<ExtraSection> sections;
  try {
    Json doc;
    PRISM_RETURN_IF_ERROR(graph_json::parse_document(text, &doc).with_context(source));
    PRISM_RETURN_IF_ERROR(graph_json::read_graph(doc, &g).with_context(source));
    for (std::string_view key : kExtraSections) {
      if (const Json* section = graph_json::find_field(doc, key); section && extra)
        sections.push_back({std::string(key), section->dump()});
    }
  } catch (const Json::parse_error& e) {
    return json_syntax_error(text, source, e.byte, e.what());
  } catch (const Json::exception& e) {
    return json_value_error(source, e.id, e.what());
  }
  PRISM_RETURN_IF_ERROR(finalize_graph(g).with_context(source));
  PRISM_RETURN_IF_ERROR(validate_graph(g).with_context(source));
  if (extra) *extra = std::move(sections);
  return g;
}

Result<ExecutionGraph> load_graph(const std::string& path, std::vector<ExtraSection>* extra) {
  PRISM_ASSIGN_OR_RETURN(std::string text, read_file(path));
  return parse_graph_json(text, path, extra);
}

}  // namespace prism
