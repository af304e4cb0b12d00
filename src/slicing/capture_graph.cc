#include "slicing/capture_graph.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "graph/role_builder.h"
#include "slicing/rank_program_groups.h"

namespace prism {
namespace {

constexpr int kHost = 0;  // the role's host stream

class ProgramOfCapture {
 public:
  ProgramOfCapture(int world_size, const std::string& source)
      : source_(source), world_(world_size), builder_("program", {"host"}) {}

  Result<RankProgram> build(const RankCapture& capture) {
    for (std::size_t i = 0; i < capture.entries.size(); ++i) {
      index_ = static_cast<int>(i);
      PRISM_RETURN_IF_ERROR(event(capture.entries[i].message));
    }
    if (!said_bye_) return fail_at(-1, "the capture ends without the rank's goodbye (bye)");
    return finish();
  }

 private:
  Status fail_at(int index, const std::string& why) const {
    const std::string where = index < 0 ? source_ : fmt::format("{}: event {}", source_, index);
    return Status::invalid_argument(fmt::format("{}: {}", where, why));
  }
  Status fail(const std::string& why) const { return fail_at(index_, why); }

  // The host has been busy from the last message to `at`: a compute op,
  // which also carries what the host waited for since (even when no time
  // passed, so that what the host does next is ordered after it).
  Status host_until(std::int64_t at) {
    if (at < host_at_)
      return fail(fmt::format("at {} ns is before the previous event's {} ns", at, host_at_));
    if (at > host_at_ || !pending_deps_.empty()) {
      last_host_op_ = builder_.compute(kHost, SimTime{at - host_at_}, "host");
      depend_on_pending();
    }
    host_at_ = at;
    return Status::ok();
  }
  void depend_on_pending() {
    for (int op : pending_deps_) builder_.add_dep(op);
    pending_deps_.clear();
  }
  // The next host op waits for `op`.
  void host_waits_for(int op) { pending_deps_.push_back(op); }

  int stream_of(std::int64_t client_stream) {
    const auto [it, added] =
        streams_.try_emplace(client_stream, static_cast<int>(streams_.size()) + 1);
    if (added) stream_names_.push_back(fmt::format("stream{}", client_stream));
    return it->second;
  }

  Status event(const wire::Message& m) {
    const wire::MessageType type = wire::type_of(m);
    if (said_bye_) return fail(fmt::format("a {} after the goodbye", wire::to_string(type)));
    if (type == wire::MessageType::kHello) return hello(std::get<wire::Hello>(m));
    if (!said_hello_)
      return fail(fmt::format("a {} before the rank's hello", wire::to_string(type)));
    switch (type) {
      case wire::MessageType::kCommInit: {
        const auto& c = std::get<wire::CommInit>(m);
        return comm_init(c.comm, c.nranks, c.rank_in_comm, c.members);
      }
      case wire::MessageType::kCommInfo: {
        // A split's answer declares the new communicator with its members.
        const auto& c = std::get<wire::CommInfo>(m);
        return comm_init(c.comm, static_cast<int>(c.members.size()), c.rank_in_comm, c.members);
      }
      case wire::MessageType::kOp:
        return op(std::get<wire::Op>(m));
      case wire::MessageType::kWait:
        return wait(std::get<wire::Wait>(m));
      case wire::MessageType::kMemory:
        return memory(std::get<wire::Memory>(m));
      case wire::MessageType::kMarker:
        return marker(std::get<wire::Marker>(m));
      case wire::MessageType::kCompute:
        return compute(std::get<wire::Compute>(m));
      case wire::MessageType::kBye:
        return bye(std::get<wire::Bye>(m).at);
      default:
        return Status::ok();  // the coordinator's answers: the program is what the rank sent
    }
  }

  Status bye(std::int64_t at) {
    PRISM_RETURN_IF_ERROR(host_until(at));
    ops_done_by_marker();
    PRISM_RETURN_IF_ERROR(host_until(at));  // the host ends after its ops
    said_bye_ = true;
    return Status::ok();
  }

  Status hello(const wire::Hello& h) {
    rank_ = h.rank;
    const int world = h.world_size;
    if (world != world_)
      return fail(fmt::format("the captured rank ran in a world of {} ranks; the job has {}", world,
                              world_));
    if (rank_ < 0 || rank_ >= world_) return fail(fmt::format("rank {} is outside the job", rank_));
    if (said_hello_) return fail("a second hello");
    said_hello_ = true;
    return Status::ok();
  }

  Status comm_init(std::uint32_t comm, int nranks, int position, std::vector<Rank> members) {
    if (comms_.contains(comm)) return fail(fmt::format("communicator {} declared twice", comm));
    if (members.empty()) {
      // A client that did not say its members: only the world in rank order
      // can be told from the size and position.
      if (nranks != world_ || position != rank_)
        return fail(
            fmt::format("communicator {} ({} ranks, this rank {} of them) does not say its members",
                        comm, nranks, position));
      members.resize(static_cast<std::size_t>(world_));
      std::iota(members.begin(), members.end(), 0);
    }
    if (std::ssize(members) != nranks || position < 0 || position >= nranks ||
        members[static_cast<std::size_t>(position)] != rank_)
      return fail(fmt::format("communicator {}: {} ranks with rank {} at position {}: members {}",
                              comm, nranks, rank_, position,
                              rank_program_internal::describe_members(members)));
    std::set<Rank> seen;
    for (Rank m : members) {
      if (m < 0 || m >= world_ || !seen.insert(m).second)
        return fail(fmt::format("communicator {}: member {} is {}", comm, m,
                                seen.contains(m) ? "listed twice" : "outside the world"));
    }
    comms_[comm] = static_cast<int>(program_.comms.size());
    program_.comms.push_back(ProgramComm{fmt::format("comm{}", comm), std::move(members)});
    return Status::ok();
  }

  // The index of global rank `peer` among the program's peers.
  int peer_index(Rank peer) {
    const auto [it, added] = peer_index_.try_emplace(peer, static_cast<int>(program_.peers.size()));
    if (added) program_.peers.push_back(peer);
    return it->second;
  }

  Status op(const wire::Op& o) {
    const std::uint32_t comm = o.comm;
    const std::int64_t bytes = o.bytes;
    const auto slot = comms_.find(comm);
    if (slot == comms_.end()) return fail(fmt::format("op on undeclared communicator {}", comm));
    if (bytes < 0 || bytes > kMaxBytes.count)
      return fail(fmt::format("bytes {} outside 0..2^50", bytes));
    if (op_ids_.contains(o.op_id)) return fail(fmt::format("op_id {} entered twice", o.op_id));
    PRISM_RETURN_IF_ERROR(host_until(o.at));
    const int st = stream_of(o.stream);
    const int peer = o.peer;
    int index;
    if (const std::optional<CollectiveKind> kind = wire::collective_of(o.code)) {
      index = builder_.collective(st, slot->second, *kind, Bytes{bytes}, o.dtype, peer);
    } else {
      // The peer is its rank in the communicator.
      const std::vector<Rank>& members =
          program_.comms[static_cast<std::size_t>(slot->second)].members;
      if (peer < 0 || peer >= std::ssize(members))
        return fail(
            fmt::format("peer {} outside communicator {}'s {} ranks", peer, comm, members.size()));
      const Rank global = members[static_cast<std::size_t>(peer)];
      if (global == rank_) return fail("a transfer to the rank itself");
      index = o.code == wire::OpCode::kSend
                  ? builder_.send(st, peer_index(global), Bytes{bytes}, o.tag)
                  : builder_.recv(st, peer_index(global), Bytes{bytes}, o.tag);
      builder_.set_dtype(index, o.dtype);
    }
    if (o.group != 0) builder_.set_group(index, o.group);
    // The op starts once the host has issued it.
    if (last_host_op_ != kNone) builder_.add_dep(last_host_op_);
    op_ids_[o.op_id] = index;
    unspent_.insert(o.op_id);
    return Status::ok();
  }

  Status wait(const wire::Wait& w) {
    PRISM_RETURN_IF_ERROR(host_until(w.at));
    if (w.op_id != wire::kAnyOp) {
      const std::uint32_t id = w.op_id;
      if (!op_ids_.contains(id)) return fail(fmt::format("a wait for op {}, never entered", id));
      if (unspent_.erase(id) > 0) host_waits_for(op_ids_[id]);
      return Status::ok();
    }
    // Any op: the earliest completion, which in a capture (every op completes
    // when entered) is the lowest unspent op.
    if (unspent_.empty()) return Status::ok();
    const std::uint32_t id = *unspent_.begin();
    unspent_.erase(unspent_.begin());
    const int op = op_ids_[id];
    if (w.until != wire::kNoLimit && builder_.op(op).kind != OpKind::kRecv) {
      polled_.push_back(op);  // a poll: the real wait is not on the wire
    } else {
      // A received tensor is waited for before the host goes on with it:
      // a blocking recv, or irecv's wait before the tensor's first use.
      host_waits_for(op);
    }
    return Status::ok();
  }

  // Ops no wait of the rank's threads consumed must be done by the next
  // iteration marker: those a poll took (a progress thread's, recorded by a
  // client of protocol 3) and those nobody waited for on the wire (a
  // capture's polls send nothing, and a future, such as DDP's reducer's,
  // is waited for by the progress thread's answer).
  void ops_done_by_marker() {
    pending_deps_.insert(pending_deps_.end(), polled_.begin(), polled_.end());
    polled_.clear();
    for (std::uint32_t id : unspent_) pending_deps_.push_back(op_ids_[id]);
    unspent_.clear();
  }

  Status marker(const wire::Marker& m) {
    PRISM_RETURN_IF_ERROR(host_until(m.at));
    switch (m.code) {
      case wire::MarkerCode::kIterationBegin:
      case wire::MarkerCode::kIterationEnd:
        ops_done_by_marker();
        PRISM_RETURN_IF_ERROR(host_until(m.at));  // the marker comes after them
        if (m.code == wire::MarkerCode::kIterationBegin) {
          builder_.marker(kHost, MarkerKind::kIteration, iterations_++);
        } else {
          builder_.marker(kHost, MarkerKind::kIterationEnd, iterations_);
        }
        break;
      case wire::MarkerCode::kMicrobatch:
        builder_.marker(kHost, MarkerKind::kMicrobatch, m.value);
        break;
      case wire::MarkerCode::kPhase:
        builder_.marker(kHost, MarkerKind::kPhase, m.value);
        break;
    }
    return Status::ok();
  }

  Status memory(const wire::Memory& m) {
    PRISM_RETURN_IF_ERROR(host_until(m.at));
    if (m.action == wire::MemoryAction::kAlloc) {
      if (m.bytes < 0 || m.bytes > kMaxBytes.count)
        return fail(fmt::format("bytes {} outside 0..2^50", m.bytes));
      if (allocs_.contains(m.id)) return fail(fmt::format("allocation {} made twice", m.id));
      allocs_[m.id] = builder_.alloc(kHost, Bytes{m.bytes});
    } else {
      const auto it = allocs_.find(m.id);
      if (it == allocs_.end()) return fail(fmt::format("free of allocation {}, never made", m.id));
      builder_.free(kHost, it->second);
      allocs_.erase(it);
    }
    return Status::ok();
  }

  // Compute the rank measured on one of its streams (a GPU's kernels).
  Status compute(const wire::Compute& c) {
    if (c.at < 0 || c.duration < 0 || c.duration > kMaxOpDuration.ns)
      return fail(fmt::format("compute at {} ns for {} ns", c.at, c.duration));
    builder_.compute(stream_of(c.stream), SimTime{c.duration}, c.name);
    return Status::ok();
  }

  RankProgram finish() {
    program_.rank = rank_;
    program_.source = source_;
    program_.role = std::move(builder_).build();
    program_.role.streams.insert(program_.role.streams.end(), stream_names_.begin(),
                                 stream_names_.end());
    return std::move(program_);
  }

  std::string source_;
  int world_;
  int rank_ = 0;
  int index_ = -1;
  RoleBuilder builder_;
  RankProgram program_;
  std::map<std::uint32_t, int> comms_;   // client handle -> index in program_.comms
  std::map<Rank, int> peer_index_;       // global rank -> index in program_.peers
  std::map<std::int64_t, int> streams_;  // client stream -> role stream
  std::vector<std::string> stream_names_;
  std::map<std::uint32_t, int> op_ids_;  // client op id -> role op
  std::set<std::uint32_t> unspent_;      // ops no wait has consumed
  std::vector<int> polled_;              // ops consumed by polls
  std::vector<int> pending_deps_;        // the next host op waits for these
  std::map<std::uint64_t, int> allocs_;  // client allocation id -> alloc op
  std::int64_t host_at_ = 0;
  int last_host_op_ = kNone;
  int iterations_ = 0;
  bool said_hello_ = false;
  bool said_bye_ = false;
};

}  // namespace

Result<RankProgram> program_from_capture(const RankCapture& capture, const std::string& source,
                                         int world_size) {
  ProgramOfCapture reader(world_size, source);
  return reader.build(capture);
}

Result<RankProgram> program_from_capture(std::string_view capture_json, const std::string& source,
                                         int world_size) {
  PRISM_ASSIGN_OR_RETURN(const RankCapture capture, parse_capture_json(capture_json, source));
  return program_from_capture(capture, source, world_size);
}

}  // namespace prism
