// assemble_graph(): one program per rank -> a graph of shared roles.
//
// Each program is first rewritten into its canonical form, in place: a
// collective's ref becomes the id of its communicator key, a send's or
// receive's ref the index of its peer among the rank's distinct peers in
// order of first use. Two ranks share a role exactly when their canonical
// programs are equal, which a hash finds in O(ops) per rank (a full
// comparison confirms every hash match). The representative of each role
// keeps its program; the others' are released as soon as they are matched.
#include "slicing/rank_program.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "graph/validate.h"
#include "slicing/rank_program_groups.h"

namespace prism {
namespace {

using rank_program_internal::KeyGroups;

class Assembler {
 public:
  Assembler(std::string name, Layout layout, std::vector<RankProgram> programs,
            const std::string& prefix)
      : programs_(std::move(programs)), prefix_(prefix) {
    graph_.name = std::move(name);
    graph_.layout = std::move(layout);
  }

  Result<ExecutionGraph> run() {
    const int world = graph_.world_size();
    if (world < 1) {
      return Status::invalid_argument(
          fmt::format("{}: world size {} (the layout's); must be >= 1", graph_.name, world));
    }
    PRISM_RETURN_IF_ERROR(order_by_rank());
    peers_.resize(static_cast<std::size_t>(world));
    graph_.role_of_rank.assign(static_cast<std::size_t>(world), kNone);
    for (Rank r = 0; r < world; ++r) {
      RankProgram& p = programs_[static_cast<std::size_t>(by_rank_[r])];
      PRISM_RETURN_IF_ERROR(add_comms(p));
      PRISM_RETURN_IF_ERROR(canonicalize(p));
      share_role(p);
    }
    for (KeyGroups& k : keys_)
      graph_.slots.push_back(CommSlot::explicit_group(k.key(), std::move(k).take_groups()));
    add_peer_slots();
    return check();
  }

 private:
  static std::string_view source(const RankProgram& p) {
    return p.source.empty() ? std::string_view("(unnamed program)") : std::string_view(p.source);
  }
  static std::string where(const RankProgram& p) {
    return fmt::format("{}: rank {}", source(p), p.rank);
  }

  // by_rank_[r]: the program of rank r; each rank exactly once.
  Status order_by_rank() {
    const int world = graph_.world_size();
    by_rank_.assign(static_cast<std::size_t>(world), kNone);
    for (std::size_t i = 0; i < programs_.size(); ++i) {
      const RankProgram& p = programs_[i];
      if (p.rank < 0 || p.rank >= world) {
        return Status::invalid_argument(
            fmt::format("{}: rank {} is outside the world of {} ranks", source(p), p.rank, world));
      }
      std::int32_t& slot = by_rank_[p.rank];
      if (slot != kNone) {
        return Status::invalid_argument(
            fmt::format("{}: a second program for rank {} (the first is from {})", where(p), p.rank,
                        programs_[static_cast<std::size_t>(slot)].source));
      }
      slot = static_cast<std::int32_t>(i);
    }
    const auto missing = std::find(by_rank_.begin(), by_rank_.end(), kNone);
    if (missing != by_rank_.end()) {
      return Status::invalid_argument(
          fmt::format("{}: no program for rank {} ({} programs for a world of {} ranks)",
                      graph_.name, missing - by_rank_.begin(), programs_.size(), world));
    }
    return Status::ok();
  }

  // Interns the program's communicator keys and records its groups.
  Status add_comms(const RankProgram& p) {
    comm_key_.clear();
    for (std::size_t c = 0; c < p.comms.size(); ++c) {
      const ProgramComm& comm = p.comms[c];
      if (comm.key.empty()) {
        return Status::invalid_argument(
            fmt::format("{}: communicator {} has an empty key", where(p), c));
      }
      const auto [it, added] =
          key_ids_.try_emplace(comm.key, static_cast<std::int32_t>(keys_.size()));
      if (added) keys_.emplace_back(comm.key, graph_.world_size());
      const std::int32_t id = it->second;
      const auto dup = std::find(comm_key_.begin(), comm_key_.end(), id);
      if (dup != comm_key_.end()) {
        return Status::invalid_argument(
            fmt::format("{}: communicators {} and {} have the same key '{}'", where(p),
                        dup - comm_key_.begin(), c, comm.key));
      }
      comm_key_.push_back(id);
      PRISM_RETURN_IF_ERROR(
          keys_[static_cast<std::size_t>(id)].add(p.rank, comm.members, where(p)));
    }
    return Status::ok();
  }

  // Rewrites communication refs: collective -> key id, send/recv -> k. Each
  // entry of p.peers is checked and looked up once, at its first use.
  Status canonicalize(RankProgram& p) {
    std::vector<Rank>& peers = peers_[p.rank];
    std::vector<std::int32_t> k_of(p.peers.size(), kNone);  // p.peers index -> k
    for (std::size_t i = 0; i < p.role.ops.size(); ++i) {
      Op& op = p.role.ops[i];
      if (op.kind == OpKind::kCollective) {
        if (op.ref < 0 || static_cast<std::size_t>(op.ref) >= comm_key_.size()) {
          return Status::invalid_argument(
              fmt::format("{} op {}: collective on communicator {}, but the rank has {}", where(p),
                          i, op.ref, comm_key_.size()));
        }
        op.ref = comm_key_[static_cast<std::size_t>(op.ref)];
      } else if (op.kind == OpKind::kSend || op.kind == OpKind::kRecv) {
        if (op.ref < 0 || static_cast<std::size_t>(op.ref) >= p.peers.size()) {
          return Status::invalid_argument(
              fmt::format("{} op {}: {} to peer {}, but the rank has {}", where(p), i,
                          to_string(op.kind), op.ref, p.peers.size()));
        }
        std::int32_t& k = k_of[static_cast<std::size_t>(op.ref)];
        if (k == kNone) {
          const Rank peer = p.peers[static_cast<std::size_t>(op.ref)];
          if (peer < 0 || peer >= graph_.world_size() || peer == p.rank) {
            return Status::invalid_argument(fmt::format(
                "{} op {}: {} with rank {}, which is {}", where(p), i, to_string(op.kind), peer,
                peer == p.rank ? "the rank itself" : "outside the world"));
          }
          const auto it = std::find(peers.begin(), peers.end(), peer);
          k = static_cast<std::int32_t>(it - peers.begin());
          if (it == peers.end()) peers.push_back(peer);
        }
        op.ref = k;
      }
    }
    return Status::ok();
  }

  void share_role(RankProgram& p) {
    const std::uint64_t h = rank_program_internal::role_hash(p.role);
    std::vector<std::int32_t>& bucket = buckets_[h];
    for (std::int32_t ri : bucket) {
      if (rank_program_internal::same_program(graph_.roles[static_cast<std::size_t>(ri)], p.role)) {
        graph_.role_of_rank[p.rank] = ri;
        p.role = Role();  // only the representative's program is kept
        return;
      }
    }
    const auto ri = static_cast<std::int32_t>(graph_.roles.size());
    bucket.push_back(ri);
    graph_.role_of_rank[p.rank] = ri;
    p.role.name = fmt::format("{}{}", prefix_, ri);
    graph_.roles.push_back(std::move(p.role));
    representative_.push_back(p.rank);
  }

  // One explicit peer slot per (role, k); send/recv refs become slot indices.
  void add_peer_slots() {
    const int world = graph_.world_size();
    std::vector<std::int32_t> first_slot(graph_.roles.size());
    for (std::size_t ri = 0; ri < graph_.roles.size(); ++ri) {
      first_slot[ri] = static_cast<std::int32_t>(graph_.slots.size());
      const std::size_t n = peers_[representative_[ri]].size();
      for (std::size_t k = 0; k < n; ++k) {
        graph_.slots.push_back(
            CommSlot::explicit_peer(fmt::format("{}.peer{}", graph_.roles[ri].name, k),
                                    std::vector<Rank>(static_cast<std::size_t>(world), kNone)));
      }
    }
    for (Rank r = 0; r < world; ++r) {
      const std::int32_t ri = graph_.role_of_rank[r];
      const std::vector<Rank>& peers = peers_[r];
      for (std::size_t k = 0; k < peers.size(); ++k)
        graph_.slots[first_slot[ri] + k].explicit_peers[r] = peers[k];
    }
    for (std::size_t ri = 0; ri < graph_.roles.size(); ++ri) {
      for (Op& op : graph_.roles[ri].ops) {
        if (op.kind == OpKind::kSend || op.kind == OpKind::kRecv) op.ref += first_slot[ri];
      }
    }
  }

  // finalize + validate; a failure names the programs behind the roles.
  Result<ExecutionGraph> check() {
    Status s = finalize_graph(graph_);
    if (s.is_ok()) s = validate_graph(graph_);
    if (s.is_ok()) return std::move(graph_);
    std::string notes;
    for (std::size_t ri = 0; ri < graph_.roles.size(); ++ri) {
      const std::string quoted = fmt::format("role '{}'", graph_.roles[ri].name);
      if (s.message().find(quoted) == std::string::npos) continue;
      const RankProgram& p = programs_[static_cast<std::size_t>(by_rank_[representative_[ri]])];
      notes += fmt::format("; {} is the program of {}", quoted, where(p));
    }
    return Status::invalid_argument(
        fmt::format("{}: the assembled graph: {}{}", graph_.name, s.message(), notes));
  }

  std::vector<RankProgram> programs_;
  std::string prefix_;
  ExecutionGraph graph_;
  std::vector<std::int32_t> by_rank_;  // rank -> index into programs_
  // By rank: its distinct peers in order of first use, which the canonical
  // program leaves out.
  std::vector<std::vector<Rank>> peers_;
  std::unordered_map<std::string, std::int32_t> key_ids_;
  std::vector<KeyGroups> keys_;         // by key id = group slot index
  std::vector<std::int32_t> comm_key_;  // current program: comms index -> key id
  std::unordered_map<std::uint64_t, std::vector<std::int32_t>> buckets_;  // hash -> roles
  std::vector<Rank> representative_;                                      // role -> its lowest rank
};

}  // namespace

Result<ExecutionGraph> assemble_graph(std::string name, Layout layout,
                                      std::vector<RankProgram> programs,
                                      const std::string& role_prefix) {
  Assembler a(std::move(name), std::move(layout), std::move(programs), role_prefix);
  return a.run();
}

}  // namespace prism
