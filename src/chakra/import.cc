// import_chakra(): finds the traces of one prefix, reads the group file,
// turns each trace into a RankProgram, names the communicators and hands the
// programs to assemble_graph().
//
// Naming communicators: a pg_name is one concrete group ("3" = ranks 8..15);
// role sharing needs a name that ranks share ("the tensor-parallel group").
// The groups that some trace uses are sorted into families, by id order: a
// group joins the first family of groups of its size that holds none of its
// ranks, or starts one. A family is a partition of some ranks into groups of
// one size, which is what a parallel dimension's groups are; it becomes one
// communicator key, "pg<id of its first group>", and the world group is
// "world".
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "chakra/attributes.h"
#include "chakra/chakra.h"
#include "chakra/comm_groups.h"
#include "chakra/et_file.h"
#include "chakra/import_rank.h"
#include "util/file.h"

namespace prism {
namespace {

namespace fs = std::filesystem;

struct TraceSet {
  fs::path dir;
  std::string prefix;
  std::vector<fs::path> files;  // by rank
};

Result<TraceSet> find_traces(const fs::path& dir_or_prefix) {
  TraceSet set;
  std::error_code ec;
  const bool is_dir = fs::is_directory(dir_or_prefix, ec);
  set.dir = is_dir ? dir_or_prefix : dir_or_prefix.parent_path();
  if (set.dir.empty()) set.dir = ".";
  if (!is_dir) set.prefix = dir_or_prefix.filename().string();
  std::map<std::string, std::map<long long, fs::path>> found;  // prefix -> rank -> file
  for (const fs::directory_entry& e : fs::directory_iterator(set.dir, ec)) {
    std::string prefix;
    long long rank = 0;
    if (!chakra::split_trace_file_name(e.path().filename().string(), &prefix, &rank)) continue;
    if (!is_dir && prefix != set.prefix) continue;
    auto [it, added] = found[prefix].try_emplace(rank, e.path());
    if (!added) {
      return Status::invalid_argument(fmt::format("{} and {}: two traces of rank {}",
                                                  it->second.string(), e.path().string(), rank));
    }
  }
  if (ec)
    return Status::not_found(fmt::format("{}: cannot list: {}", set.dir.string(), ec.message()));
  if (found.empty()) {
    return Status::not_found(fmt::format("{}: no Chakra traces (<prefix>.<rank>.et){}",
                                         dir_or_prefix.string(), is_dir ? "" : " of this prefix"));
  }
  if (found.size() > 1) {
    std::vector<std::string> names;
    for (const auto& [p, ranks] : found) names.push_back(p);
    return Status::invalid_argument(
        fmt::format("{}: traces of several prefixes ({}); name one: {}/<prefix>", set.dir.string(),
                    fmt::join(names, ", "), set.dir.string()));
  }
  set.prefix = found.begin()->first;
  const std::map<long long, fs::path>& ranks = found.begin()->second;
  for (long long r = 0; r < static_cast<long long>(ranks.size()); ++r) {
    const auto it = ranks.find(r);
    if (it == ranks.end()) {
      return Status::not_found(
          fmt::format("{}: no trace of rank {} (found {} traces, up to rank "
                      "{})",
                      (set.dir / chakra::trace_file_name(set.prefix, r)).string(), r, ranks.size(),
                      ranks.rbegin()->first));
    }
    set.files.push_back(it->second);
  }
  return set;
}

// The group file: options' or the default beside the traces, when present.
Result<std::vector<chakra::CommGroup>> read_groups(const TraceSet& set,
                                                   const ChakraImportOptions& o, int world,
                                                   std::string* source) {
  fs::path path = o.comm_groups;
  if (path.empty()) {
    path = set.dir / chakra::comm_groups_file_name(set.prefix);
    std::error_code ec;
    if (!fs::exists(path, ec)) return std::vector<chakra::CommGroup>();
  }
  *source = path.string();
  PRISM_ASSIGN_OR_RETURN(const std::string text, read_file(path.string()));
  return chakra::parse_comm_groups(text, world, *source);
}

// pg_name -> communicator key (see the top of this file).
std::map<std::string, std::string> family_keys(const std::vector<chakra::CommGroup>& groups,
                                               const std::vector<RankProgram>& programs,
                                               int world) {
  std::map<std::string, std::string> keys{{chakra::kWorldPg, "world"}};
  std::set<std::string> used;
  for (const RankProgram& p : programs)
    for (const ProgramComm& c : p.comms) used.insert(c.key);
  struct Family {
    std::size_t size;
    std::string key;
    std::vector<bool> holds;
  };
  std::vector<Family> families;
  for (const chakra::CommGroup& g : groups) {
    if (!used.contains(g.id) || g.id == chakra::kWorldPg) continue;
    Family* home = nullptr;
    for (Family& f : families) {
      if (f.size != g.members.size()) continue;
      if (std::none_of(g.members.begin(), g.members.end(), [&](Rank r) { return f.holds[r]; })) {
        home = &f;
        break;
      }
    }
    if (home == nullptr) {
      families.push_back({g.members.size(), "pg" + g.id, std::vector<bool>(world, false)});
      home = &families.back();
    }
    for (Rank r : g.members) home->holds[r] = true;
    keys[g.id] = home->key;
  }
  return keys;
}

}  // namespace

Result<ExecutionGraph> import_chakra(const fs::path& dir_or_prefix,
                                     const ChakraImportOptions& options) {
  if (options.gpus_per_node < 1) {
    return Status::invalid_argument(
        fmt::format("Chakra import: gpus_per_node {} must be >= 1", options.gpus_per_node));
  }
  PRISM_ASSIGN_OR_RETURN(const TraceSet set, find_traces(dir_or_prefix));
  const int world = static_cast<int>(set.files.size());
  chakra::ImportContext ctx;
  ctx.world_size = world;
  PRISM_ASSIGN_OR_RETURN(const std::vector<chakra::CommGroup> groups,
                         read_groups(set, options, world, &ctx.groups_source));
  std::unordered_map<std::string, std::vector<Rank>> members;
  for (const chakra::CommGroup& g : groups) members[g.id] = g.members;
  if (!ctx.groups_source.empty()) ctx.groups = &members;

  std::vector<RankProgram> programs;
  programs.reserve(set.files.size());
  std::optional<std::string> cluster;  // rank 0's, as PrismLLM's export writes it
  for (Rank r = 0; r < world; ++r) {
    const std::string source = set.files[r].string();
    PRISM_ASSIGN_OR_RETURN(const std::string bytes, read_file(source));
    PRISM_ASSIGN_OR_RETURN(const chakra::EtFile file, chakra::decode_et(bytes, source));
    if (r == 0) {
      PRISM_ASSIGN_OR_RETURN(cluster,
                             chakra::string_attr(file.metadata->attr(), chakra::kPrismCluster,
                                                 fmt::format("{}: the GlobalMetadata", source)));
    }
    PRISM_ASSIGN_OR_RETURN(RankProgram p, chakra::rank_program(file, r, ctx, source));
    programs.push_back(std::move(p));
  }
  const std::map<std::string, std::string> keys = family_keys(groups, programs, world);
  for (RankProgram& p : programs)
    for (ProgramComm& c : p.comms) c.key = keys.at(c.key);
  Layout layout(world, {{"rank", world}}, options.gpus_per_node);
  PRISM_ASSIGN_OR_RETURN(ExecutionGraph g,
                         assemble_graph(options.name.empty() ? set.prefix : options.name,
                                        std::move(layout), std::move(programs), "role"));
  if (cluster) g.cluster = *cluster;
  return g;
}

}  // namespace prism
