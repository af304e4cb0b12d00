#include "slicing/slices.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "graph/validate.h"
#include "net/cluster_yaml.h"
#include "slicing/capture_file.h"
#include "slicing/capture_graph.h"
#include "slicing/graph_objects.h"
#include "slicing/rank_program_groups.h"
#include "slicing/role_split.h"
#include "slicing/slices_grid.h"
#include "util/file.h"
#include "util/json_depth.h"
#include "util/text_error.h"

namespace prism {
namespace {

using rank_program_internal::describe_members;
using rank_program_internal::KeyGroups;
using slices_internal::anchor;
using slices_internal::check_same_program;
using slices_internal::group_shape;
using slices_internal::GroupShape;
using slices_internal::move;
using slices_internal::move_group;

// "tp 1, cp 1, dp 2, pp 2"
std::string grid_text(const Layout& l) {
  std::string out;
  for (const GridDim& d : l.dims())
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", d.name, d.size);
  return out;
}

class SliceAssembler {
 public:
  SliceAssembler(const JobSpec& job, const ExecutionGraph* model, SliceRoles roles)
      : job_(job), model_(model), roles_(std::move(roles)) {
    if (model_ != nullptr) {  // its slots and overrides; roles are added one by one
      graph_.slots = model_->slots;
      graph_.overrides = model_->overrides;
    }
    graph_.name = job.name;
    graph_.layout = roles_.layout;
    graph_.role_of_rank = roles_.role_of_rank;
    fixed_dim_ = roles_.layout.find_dim("pp");
  }

  Result<SlicedGraph> run(std::vector<RankProgram> captures) {
    PRISM_RETURN_IF_ERROR(sort(std::move(captures)));
    for (std::size_t ri = 0; ri < roles_.names.size(); ++ri)
      PRISM_RETURN_IF_ERROR(add_role(static_cast<int>(ri)));
    for (auto& [s, table] : tables_)
      graph_.slots[static_cast<std::size_t>(s)] =
          CommSlot::explicit_group(table.key(), std::move(table).take_groups());
    Status s = finalize_graph(graph_);
    if (s.is_ok()) s = validate_graph(graph_);
    if (!s.is_ok())
      return Status::invalid_argument(
          fmt::format("{}: the graph built from the captures: {}", job_.name, s.message()));
    return SlicedGraph{std::move(graph_), std::move(sources_), {}};
  }

 private:
  const Layout& layout() const { return roles_.layout; }

  // Captures by role, each role's in rank order.
  Status sort(std::vector<RankProgram> captures) {
    by_role_.resize(roles_.names.size());
    std::map<Rank, std::string> seen;
    for (RankProgram& p : captures) {
      if (p.rank < 0 || p.rank >= layout().world_size())
        return Status::invalid_argument(fmt::format("{}: rank {} is outside job '{}' of {} ranks",
                                                    p.source, p.rank, job_.name,
                                                    layout().world_size()));
      const auto [it, added] = seen.try_emplace(p.rank, p.source);
      if (!added)
        return Status::invalid_argument(fmt::format(
            "{}: a second capture of rank {} (the first: {})", p.source, p.rank, it->second));
      by_role_[static_cast<std::size_t>(roles_.role_of_rank[p.rank])].push_back(std::move(p));
    }
    for (std::vector<RankProgram>& role : by_role_)
      std::sort(role.begin(), role.end(),
                [](const RankProgram& a, const RankProgram& b) { return a.rank < b.rank; });
    return Status::ok();
  }

  Status add_role(int ri) {
    const std::string& name = roles_.names[static_cast<std::size_t>(ri)];
    const std::vector<Rank>& ranks = roles_.ranks[static_cast<std::size_t>(ri)];
    const std::string what = roles_.what.size() > static_cast<std::size_t>(ri)
                                 ? roles_.what[static_cast<std::size_t>(ri)]
                                 : std::string();
    RoleSource src{name, static_cast<int>(ranks.size()), ranks.front(), kNone, {}, {}};
    if (!what.empty())
      src.what = ranks.size() == 1 ? what : fmt::format("ranks {}: {}", compact_ranks(ranks), what);
    std::vector<RankProgram>& captured = by_role_[static_cast<std::size_t>(ri)];
    if (captured.empty()) {
      if (model_ == nullptr)
        return Status::invalid_argument(fmt::format(
            "job '{}': role '{}' ({} ranks from rank {}) has no captured rank, and the job has no "
            "model section to fall back on: capture one of its ranks",
            job_.name, name, ranks.size(), ranks.front()));
      graph_.roles.push_back(model_->roles[static_cast<std::size_t>(ri)]);
      sources_.push_back(std::move(src));
      return Status::ok();
    }
    RankProgram& rep = captured.front();
    anchored_.clear();
    for (std::size_t i = 1; i < captured.size(); ++i) {
      Status same = check_same_program(layout(), rep, captured[i], &anchored_);
      if (!same.is_ok())
        return same.with_context(
            fmt::format("job '{}': role '{}' ({}): its ranks do not all run one program, as "
                        "the layout's roles assume",
                        job_.name, name, what.empty() ? "a pipeline stage" : what));
      src.checked.push_back(captured[i].rank);
    }
    std::vector<int> comm_slot(rep.comms.size(), kNone);
    std::vector<int> peer_slot(rep.peers.size(), kNone);
    for (std::size_t i = 0; i < rep.role.ops.size(); ++i) {
      Op& op = rep.role.ops[i];
      if (op.kind != OpKind::kCollective && op.kind != OpKind::kSend && op.kind != OpKind::kRecv)
        continue;
      const bool group = op.kind == OpKind::kCollective;
      const std::size_t n = group ? rep.comms.size() : rep.peers.size();
      if (op.ref < 0 || static_cast<std::size_t>(op.ref) >= n)
        return Status::invalid_argument(fmt::format("{}: rank {} op {}: {} {} of {}", rep.source,
                                                    rep.rank, i, group ? "communicator" : "peer",
                                                    op.ref, n));
      int& slot = (group ? comm_slot : peer_slot)[static_cast<std::size_t>(op.ref)];
      if (slot == kNone) {
        Result<int> s = group ? group_slot(ri, rep, static_cast<std::size_t>(op.ref))
                              : peer_to_slot(ri, rep, static_cast<std::size_t>(op.ref));
        if (!s.is_ok())
          return s.status().with_context(fmt::format("{}: rank {}", rep.source, rep.rank));
        slot = s.value();
      }
      op.ref = slot;
    }
    rep.role.name = name;
    graph_.roles.push_back(std::move(rep.role));
    src.captured = rep.rank;
    sources_.push_back(std::move(src));
    return Status::ok();
  }

  // The slot called `slot.name`, added as `slot` when there is none.
  int named_slot(CommSlot slot) {
    const auto [it, added] =
        slot_of_name_.try_emplace(slot.name, static_cast<int>(graph_.slots.size()));
    if (added) graph_.slots.push_back(std::move(slot));
    return it->second;
  }
  // A name of our own that no model slot has.
  std::string own_name(std::string name) const {
    if (model_ != nullptr && model_->find_slot(name) != kNone) return "captured." + name;
    return name;
  }

  Result<int> group_slot(int ri, const RankProgram& rep, std::size_t c) {
    const std::vector<Rank>& members = rep.comms[c].members;
    // The k-th communicator of the rank with these members.
    const auto k =
        std::count_if(rep.comms.begin(), rep.comms.begin() + static_cast<std::ptrdiff_t>(c),
                      [&](const ProgramComm& o) { return o.members == members; });
    if (model_ != nullptr) {
      const SlotResolver res = model_->resolver();
      std::vector<Rank> theirs;
      int matched = 0;
      int last = kNone;
      for (std::size_t s = 0; s < model_->slots.size(); ++s) {
        const int si = static_cast<int>(s);
        if (model_->slots[s].kind != CommSlot::Kind::kGroup || res.group_id(si, rep.rank) == kNone)
          continue;
        theirs.clear();
        res.members(si, rep.rank, &theirs);
        if (theirs != members) continue;
        if (matched++ == k) return si;
        last = si;
      }
      if (last != kNone) return last;
    }
    PRISM_ASSIGN_OR_RETURN(GroupShape shape, group_shape(layout(), members, fixed_dim_));
    if (k > 0) shape.name += fmt::format("#{}", k + 1);
    if (shape.grid) return named_slot(CommSlot::grid_group(own_name(shape.name), shape.dims));
    const std::string name = own_name(shape.name);
    const int s = named_slot(CommSlot::explicit_group(name, {}));
    KeyGroups& table = tables_.try_emplace(s, name, layout().world_size()).first->second;
    for (Rank r : roles_.ranks[static_cast<std::size_t>(ri)]) {
      Status added = table.add(r, move_group(layout(), members, rep.rank, r),
                               fmt::format("rank {} (rank {}'s program moved there)", r, rep.rank));
      if (!added.is_ok())
        return Status::invalid_argument(fmt::format(
            "communicator {} ('{}') does not move with the ranks of the job's grid ({}): {}",
            describe_members(members), name, grid_text(layout()), added.message()));
    }
    return s;
  }

  Result<int> peer_to_slot(int ri, const RankProgram& rep, std::size_t k) {
    const Rank peer = rep.peers[k];
    const bool anchored = anchored_.count(k) != 0;  // the same peer wherever the rank is
    if (model_ != nullptr && !anchored) {
      const SlotResolver res = model_->resolver();
      for (std::size_t s = 0; s < model_->slots.size(); ++s) {
        const int si = static_cast<int>(s);
        if (model_->slots[s].kind == CommSlot::Kind::kPeer && res.peer(si, rep.rank) == peer)
          return si;
      }
    }
    std::vector<int> differ;
    for (std::size_t d = 0; d < layout().dims().size(); ++d) {
      const int i = static_cast<int>(d);
      if (layout().coord(peer, i) != layout().coord(rep.rank, i)) differ.push_back(i);
    }
    if (differ.size() == 1 && !anchored) {
      const int d = differ.front();
      const GridDim& dim = layout().dims()[static_cast<std::size_t>(d)];
      const int step = layout().coord(peer, d) - layout().coord(rep.rank, d);
      if (d == fixed_dim_)  // the role's own dimension: no wrapping
        return named_slot(
            CommSlot::grid_peer(own_name(fmt::format("{}{:+d}", dim.name, step)), d, step, false));
      const int offset = (step + dim.size) % dim.size;
      return named_slot(
          CommSlot::grid_peer(own_name(fmt::format("{}+{}", dim.name, offset)), d, offset, true));
    }
    const std::string name =
        own_name(fmt::format("{}.peer{}", roles_.names[static_cast<std::size_t>(ri)], k));
    const int s = named_slot(CommSlot::explicit_peer(
        name, std::vector<Rank>(static_cast<std::size_t>(layout().world_size()), kNone)));
    for (Rank r : roles_.ranks[static_cast<std::size_t>(ri)])
      graph_.slots[static_cast<std::size_t>(s)].explicit_peers[static_cast<std::size_t>(r)] =
          anchored ? anchor(layout(), peer, rep.rank, r) : move(layout(), peer, rep.rank, r);
    return s;
  }

  const JobSpec& job_;
  const ExecutionGraph* model_;
  SliceRoles roles_;
  int fixed_dim_ = -1;
  ExecutionGraph graph_;
  std::vector<RoleSource> sources_;
  std::vector<std::vector<RankProgram>> by_role_;
  std::map<std::string, int> slot_of_name_;  // slots of our own
  std::map<int, KeyGroups> tables_;          // explicit group slot -> its groups
  std::set<std::size_t> anchored_;           // the role being added: its anchored peers
};

}  // namespace

Result<Layout> program_layout(const JobSpec& job) {
  const int gpn = job.cluster.gpus_per_node;
  if (job.ep() == 1)
    return Layout(job.num_gpus,
                  {{"tp", job.tp()}, {"cp", job.cp()}, {"dp", job.dp()}, {"pp", job.pp()}}, gpn);
  if (job.etp() != job.tp() || job.dp() % job.ep() != 0)
    return Status::invalid_argument(fmt::format(
        "job '{}': expert_model_parallel_size {} with expert_tensor_parallel_size {}: a "
        "program's experts must divide its data-parallel size ({}) with the tensor-parallel "
        "size unchanged ({})",
        job.name, job.ep(), job.etp(), job.dp(), job.tp()));
  return Layout(job.num_gpus,
                {{"tp", job.tp()},
                 {"cp", job.cp()},
                 {"ep", job.ep()},
                 {"edp", job.dp() / job.ep()},
                 {"pp", job.pp()}},
                gpn);
}

Result<SliceRoles> slice_roles(const JobSpec& job, const ExecutionGraph* model) {
  SliceRoles r;
  if (model != nullptr) {
    r.layout = model->layout;
    for (const Role& role : model->roles) r.names.push_back(role.name);
    r.role_of_rank = model->role_of_rank;
  } else {
    PRISM_ASSIGN_OR_RETURN(r.layout, program_layout(job));
    const int pp = r.layout.find_dim("pp");
    for (int s = 0; s < job.pp(); ++s) r.names.push_back(fmt::format("stage{}", s));
    for (Rank k = 0; k < r.layout.world_size(); ++k)
      r.role_of_rank.push_back(r.layout.coord(k, pp));
  }
  r.ranks.resize(r.names.size());
  for (Rank k = 0; k < r.layout.world_size(); ++k)
    r.ranks[static_cast<std::size_t>(r.role_of_rank[static_cast<std::size_t>(k)])].push_back(k);
  for (std::size_t i = 0; i < r.ranks.size(); ++i) {
    if (r.ranks[i].empty())
      return Status::invalid_argument(
          fmt::format("job '{}': role '{}' has no rank", job.name, r.names[i]));
  }
  return r;
}

Result<SlicedGraph> graph_from_slices(const JobSpec& job, const ExecutionGraph* model,
                                      std::vector<RankProgram> captures, const RoleHints& hints) {
  SliceRoles roles;
  std::vector<std::string> splits;
  if (model != nullptr) {
    PRISM_ASSIGN_OR_RETURN(roles, slice_roles(job, model));
  } else {
    PRISM_ASSIGN_OR_RETURN(FoundRoles found, find_roles(job, captures, hints));
    if (!found.capture.empty())
      return Status::invalid_argument(fmt::format(
          "{}; to tell which rule of the layout splits it, capture {} {} too", found.pending,
          found.capture.size() == 1 ? "rank" : "ranks", compact_ranks(found.capture)));
    roles = std::move(found.roles);
    splits = std::move(found.splits);
  }
  SliceAssembler a(job, model, std::move(roles));
  PRISM_ASSIGN_OR_RETURN(SlicedGraph sliced, a.run(std::move(captures)));
  sliced.graph.cluster = format_cluster_yaml(job.cluster);
  sliced.splits = std::move(splits);
  return sliced;
}

Result<std::vector<RankProgram>> read_slices(const std::string& dir, int world_size,
                                             std::map<Rank, std::vector<CapturedObject>>* sent) {
  std::error_code ec;
  std::vector<std::string> paths;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".json" && e.is_regular_file()) paths.push_back(e.path().string());
  }
  if (ec) return Status::io_error(fmt::format("{}: {}", dir, ec.message()));
  std::sort(paths.begin(), paths.end());
  std::vector<RankProgram> out;
  for (const std::string& path : paths) {
    PRISM_ASSIGN_OR_RETURN(const std::string text, read_file(path));
    PRISM_RETURN_IF_ERROR(check_json_depth(text, path));
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
      return json_syntax_error(text, path, e.byte, e.what());
    } catch (const nlohmann::json::exception& e) {
      return json_value_error(path, e.id, e.what());
    }
    if (!is_capture_document(doc)) continue;
    PRISM_ASSIGN_OR_RETURN(const RankCapture capture, capture_from_json(doc, path));
    PRISM_ASSIGN_OR_RETURN(RankProgram p, program_from_capture(capture, path, world_size));
    if (sent != nullptr) (*sent)[capture.rank] = capture.objects;
    out.push_back(std::move(p));
  }
  if (out.empty())
    return Status::invalid_argument(
        fmt::format("{}: no capture files (JSON with \"format\": \"prism-capture\") in it", dir));
  return out;
}

std::vector<ExtraSection> slice_object_sections(
    const SlicedGraph& s, const std::map<Rank, std::vector<CapturedObject>>& sent) {
  GraphObjects kept;
  for (const Role& role : s.graph.roles) {
    kept.captured.push_back(kNone);
    for (const RoleSource& source : s.roles)
      if (source.role == role.name) kept.captured.back() = source.captured;
  }
  for (Rank r : std::set<Rank>(kept.captured.begin(), kept.captured.end())) {
    const auto it = sent.find(r);
    if (it == sent.end()) continue;
    kept.objects.insert(kept.objects.end(), it->second.begin(), it->second.end());
  }
  return graph_object_sections(s.graph, kept);
}

Status check_capturable(const JobSpec& job) {
  if (job.has_model)
    return Status::invalid_argument(fmt::format(
        "job '{}' has a model section: its graph comes from the model, not a capture", job.name));
  return Status::ok();
}

Result<ExecutionGraph> graph_from_capture(const JobSpec& job, std::string_view capture_json,
                                          const std::string& source) {
  PRISM_RETURN_IF_ERROR(check_capturable(job));
  PRISM_ASSIGN_OR_RETURN(RankProgram program,
                         program_from_capture(capture_json, source, job.num_gpus));
  std::vector<RankProgram> slices;
  slices.push_back(std::move(program));
  PRISM_ASSIGN_OR_RETURN(SlicedGraph sliced, graph_from_slices(job, nullptr, std::move(slices)));
  return std::move(sliced.graph);
}

std::string format_slice_report(const SlicedGraph& s) {
  const ExecutionGraph& g = s.graph;
  std::string dims;
  for (const GridDim& d : g.layout.dims())
    dims += fmt::format("{}{} {}", dims.empty() ? "" : ", ", d.name, d.size);
  std::string out =
      fmt::format("{}: {} ranks ({}), {} roles\n", g.name, g.world_size(), dims, s.roles.size());
  std::size_t width = 10;  // split roles' names are longer
  for (const RoleSource& r : s.roles) width = std::max(width, r.role.size());
  out += fmt::format("  {:<{}} {:>6} {:>6}  {}\n", "role", width, "ranks", "first", "program");
  for (const RoleSource& r : s.roles) {
    std::string what = r.captured == kNone ? "modelled: no rank captured; the builder's model"
                                           : fmt::format("captured rank {}", r.captured);
    if (!r.checked.empty())
      what += fmt::format("; the same program as captured {} {}",
                          r.checked.size() == 1 ? "rank" : "ranks", fmt::join(r.checked, ","));
    else if (!r.what.empty())
      what += r.num_ranks == 1 ? "; one rank" : "; not verified";
    if (!r.what.empty()) what += "; " + r.what;
    out +=
        fmt::format("  {:<{}} {:>6} {:>6}  {}\n", r.role, width, r.num_ranks, r.first_rank, what);
  }
  for (const std::string& line : s.splits) out += fmt::format("  {}\n", line);
  return out;
}

}  // namespace prism
