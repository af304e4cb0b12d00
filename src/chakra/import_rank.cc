// rank_program(): the DAG of one trace in issue order. Dependencies are
// checked (every one names a node of the file, none forms a cycle), the
// nodes are ordered (Kahn's algorithm, lowest id first), and the nodes that
// take no part (chakra/import_rank.h) hand their dependencies on.
#include "chakra/import_rank.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <unordered_map>

#include <fmt/format.h>

#include "chakra/program_builder.h"

namespace prism::chakra {
namespace {

using ChakraProtoMsg::Node;

class RankImporter {
 public:
  RankImporter(const EtFile& file, Rank rank, const ImportContext& ctx, const std::string& source)
      : nodes_(file.nodes), meta_(*file.metadata), source_(source), builder_(rank, ctx, source) {}

  Result<RankProgram> run() {
    PRISM_RETURN_IF_ERROR(builder_.start(meta_));
    PRISM_RETURN_IF_ERROR(index());
    PRISM_RETURN_IF_ERROR(link());
    PRISM_RETURN_IF_ERROR(order());
    PRISM_RETURN_IF_ERROR(build());
    return std::move(builder_).finish();
  }

 private:
  Place where(std::size_t i) const { return Place(source_, nodes_[i]->id()); }

  // Node id -> position in the file; which nodes become ops.
  Status index() {
    const std::size_t n = nodes_.size();
    position_.reserve(n);
    kept_.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      if (!position_.try_emplace(nodes_[i]->id(), static_cast<std::int32_t>(i)).second) {
        return Status::invalid_argument(
            fmt::format("{}: node id {} appears twice", source_, nodes_[i]->id()));
      }
      PRISM_ASSIGN_OR_RETURN(const bool kept, is_op_node(*nodes_[i], where(i)));
      kept_[i] = kept;
    }
    return Status::ok();
  }

  // Dependencies (ctrl and data alike) as positions, and their reverse, both
  // as offset tables: deps of i are dep_[dep_begin_[i] .. dep_begin_[i + 1]).
  Status link() {
    const std::size_t n = nodes_.size();
    dep_begin_.assign(n + 1, 0);
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t begin = dep_.size();
      for (const auto* list : {&nodes_[i]->ctrl_deps(), &nodes_[i]->data_deps()}) {
        for (std::uint64_t id : *list) {
          const auto it = position_.find(id);
          if (it == position_.end()) {
            return Status::invalid_argument(fmt::format(
                "{}: depends on node {}, which is not in the file", where(i).str(), id));
          }
          if (std::find(dep_.begin() + static_cast<std::ptrdiff_t>(begin), dep_.end(),
                        it->second) == dep_.end())
            dep_.push_back(it->second);
        }
      }
      dep_begin_[i + 1] = static_cast<std::int32_t>(dep_.size());
    }
    child_begin_.assign(n + 1, 0);
    for (std::int32_t d : dep_) ++child_begin_[d + 1];
    for (std::size_t i = 0; i < n; ++i) child_begin_[i + 1] += child_begin_[i];
    child_.resize(dep_.size());
    std::vector<std::int32_t> fill(child_begin_.begin(), child_begin_.end() - 1);
    for (std::size_t i = 0; i < n; ++i)
      for (std::int32_t k = dep_begin_[i]; k < dep_begin_[i + 1]; ++k)
        child_[fill[dep_[k]]++] = static_cast<std::int32_t>(i);
    return Status::ok();
  }

  // Topological order, the lowest ready id first.
  Status order() {
    using Entry = std::pair<std::uint64_t, std::int32_t>;  // (id, position)
    const std::size_t n = nodes_.size();
    std::vector<std::int32_t> waiting(n);
    std::priority_queue<Entry, std::vector<Entry>, std::greater<>> ready;
    for (std::size_t i = 0; i < n; ++i) {
      waiting[i] = dep_begin_[i + 1] - dep_begin_[i];
      if (waiting[i] == 0) ready.emplace(nodes_[i]->id(), static_cast<std::int32_t>(i));
    }
    order_.reserve(n);
    while (!ready.empty()) {
      const std::int32_t i = ready.top().second;
      ready.pop();
      order_.push_back(i);
      for (std::int32_t k = child_begin_[i]; k < child_begin_[i + 1]; ++k)
        if (--waiting[child_[k]] == 0) ready.emplace(nodes_[child_[k]]->id(), child_[k]);
    }
    if (order_.size() == n) return Status::ok();
    // Every node left waits, directly or not, on a cycle; name the lowest.
    std::uint64_t lowest = UINT64_MAX;
    for (std::size_t i = 0; i < n; ++i)
      if (waiting[i] > 0) lowest = std::min<std::uint64_t>(lowest, nodes_[i]->id());
    return Status::invalid_argument(fmt::format(
        "{}: node {} is part of or waits on a dependency cycle ({} of {} nodes cannot run)",
        source_, lowest, n - order_.size(), n));
  }

  // Ops in order; a node left out passes its dependencies to its dependents.
  Status build() {
    std::vector<std::int32_t> op_of(nodes_.size(), kNone);
    std::unordered_map<std::int32_t, std::vector<std::int32_t>> forwarded;  // left-out nodes
    std::vector<std::int32_t> deps;
    std::int32_t ops = 0;
    for (std::int32_t i : order_) {
      deps.clear();
      for (std::int32_t k = dep_begin_[i]; k < dep_begin_[i + 1]; ++k) {
        const std::int32_t d = dep_[k];
        if (op_of[d] != kNone) {
          deps.push_back(op_of[d]);
        } else {
          const std::vector<std::int32_t>& f = forwarded[d];
          deps.insert(deps.end(), f.begin(), f.end());
        }
      }
      std::sort(deps.begin(), deps.end());
      deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
      if (!kept_[i]) {
        forwarded[i] = deps;
        continue;
      }
      PRISM_RETURN_IF_ERROR(builder_.add(*nodes_[i], deps));
      op_of[i] = ops++;
    }
    return Status::ok();
  }

  const std::vector<const Node*>& nodes_;
  const ChakraProtoMsg::GlobalMetadata& meta_;
  std::string source_;
  ProgramBuilder builder_;
  std::unordered_map<std::uint64_t, std::int32_t> position_;
  std::vector<bool> kept_;
  std::vector<std::int32_t> dep_, dep_begin_, child_, child_begin_;
  std::vector<std::int32_t> order_;
};

}  // namespace

Result<RankProgram> rank_program(const EtFile& file, Rank rank, const ImportContext& ctx,
                                 const std::string& source) {
  RankImporter importer(file, rank, ctx, source);
  return importer.run();
}

}  // namespace prism::chakra
