#include "workload/capture_graph.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "graph/role_builder.h"
#include "workload/rank_program_groups.h"
#include "workload/slices.h"

namespace prism {
namespace {

using nlohmann::json;

constexpr int kHost = 0;  // the role's host stream

class CaptureReader {
 public:
  CaptureReader(int world_size, const std::string& source)
      : source_(source), world_(world_size), builder_("program", {"host"}) {}

  Result<RankProgram> build(const json& doc) {
    if (!doc.is_object() || doc.value("format", "") != "prism-capture")
      return fail_at(-1, "not a prism-capture document (\"format\": \"prism-capture\")");
    if (doc.value("version", 0) != 1)
      return fail_at(-1, fmt::format("version {} (this build reads version 1)",
                                     doc.value("version", json()).dump()));
    if (!doc.contains("events") || !doc["events"].is_array())
      return fail_at(-1, "no \"events\" list");
    const json& events = doc["events"];
    for (std::size_t i = 0; i < events.size(); ++i) {
      index_ = static_cast<int>(i);
      Status s = event(events[i]);
      if (!s.is_ok()) return s;
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

  template <typename T>
  Result<T> field(const json& e, const char* name) const {
    if (!e.contains(name)) return fail(fmt::format("no \"{}\"", name));
    try {
      return e.at(name).get<T>();
    } catch (const json::exception&) {
      return fail(fmt::format("\"{}\" is {}, not the expected type", name, e.at(name).dump()));
    }
  }

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
    for (int op : pending_deps_) builder_.add_deps({op});
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

  Status event(const json& e) {
    if (!e.is_object()) return fail("not an object");
    PRISM_ASSIGN_OR_RETURN(const std::string type, field<std::string>(e, "type"));
    if (said_bye_) return fail(fmt::format("a {} after the goodbye", type));
    if (type == "hello") return hello(e);
    if (!said_hello_) return fail(fmt::format("a {} before the rank's hello", type));
    // A split's answer declares the new communicator with its members.
    if (type == "comm_init" || type == "comm_info") return comm_init(e);
    if (type == "op") return op(e);
    if (type == "wait") return wait(e);
    if (type == "memory") return memory(e);
    if (type == "marker") return marker(e);
    if (type == "compute") return compute(e);
    if (type == "bye") {
      PRISM_ASSIGN_OR_RETURN(const std::int64_t at, field<std::int64_t>(e, "at"));
      PRISM_RETURN_IF_ERROR(host_until(at));
      polled_before_marker();
      PRISM_RETURN_IF_ERROR(host_until(at));  // the host ends after the ops it polled
      said_bye_ = true;
      return Status::ok();
    }
    if (type == "welcome" || type == "complete" || type == "horizon" || type == "error" ||
        type == "comm_split")
      return Status::ok();  // the coordinator's answers: the program is what the rank sent
    return fail(fmt::format("unknown event type '{}'", type));
  }

  Status hello(const json& e) {
    PRISM_ASSIGN_OR_RETURN(rank_, field<int>(e, "rank"));
    PRISM_ASSIGN_OR_RETURN(const int world, field<int>(e, "world_size"));
    if (world != world_)
      return fail(fmt::format("the captured rank ran in a world of {} ranks; the job has {}", world,
                              world_));
    if (rank_ < 0 || rank_ >= world_) return fail(fmt::format("rank {} is outside the job", rank_));
    if (said_hello_) return fail("a second hello");
    said_hello_ = true;
    return Status::ok();
  }

  Status comm_init(const json& e) {
    PRISM_ASSIGN_OR_RETURN(const std::uint32_t comm, field<std::uint32_t>(e, "comm"));
    PRISM_ASSIGN_OR_RETURN(const int nranks, field<int>(e, "nranks"));
    PRISM_ASSIGN_OR_RETURN(const int position, field<int>(e, "rank_in_comm"));
    std::vector<Rank> members = e.value("members", std::vector<Rank>{});
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

  Status op(const json& e) {
    PRISM_ASSIGN_OR_RETURN(const std::int64_t at, field<std::int64_t>(e, "at"));
    PRISM_ASSIGN_OR_RETURN(const std::uint32_t op_id, field<std::uint32_t>(e, "op_id"));
    PRISM_ASSIGN_OR_RETURN(const std::string code, field<std::string>(e, "code"));
    PRISM_ASSIGN_OR_RETURN(const std::uint32_t comm, field<std::uint32_t>(e, "comm"));
    PRISM_ASSIGN_OR_RETURN(const std::int64_t stream, field<std::int64_t>(e, "stream"));
    PRISM_ASSIGN_OR_RETURN(const std::string dtype_name, field<std::string>(e, "dtype"));
    PRISM_ASSIGN_OR_RETURN(const std::int64_t bytes, field<std::int64_t>(e, "bytes"));
    PRISM_ASSIGN_OR_RETURN(const int peer, field<int>(e, "peer"));
    const int tag = e.value("tag", 0);
    const std::uint32_t group = e.value("group", 0u);
    const auto slot = comms_.find(comm);
    if (slot == comms_.end()) return fail(fmt::format("op on undeclared communicator {}", comm));
    const std::optional<DType> dtype = parse_dtype(dtype_name);
    if (!dtype) return fail(fmt::format("unknown dtype '{}'", dtype_name));
    if (bytes < 0 || bytes > kMaxBytes.count)
      return fail(fmt::format("bytes {} outside 0..2^50", bytes));
    if (op_ids_.contains(op_id)) return fail(fmt::format("op_id {} entered twice", op_id));
    PRISM_RETURN_IF_ERROR(host_until(at));
    const int st = stream_of(stream);
    int index;
    if (code == "send" || code == "recv") {
      // The peer is its rank in the communicator.
      const std::vector<Rank>& members =
          program_.comms[static_cast<std::size_t>(slot->second)].members;
      if (peer < 0 || peer >= std::ssize(members))
        return fail(
            fmt::format("peer {} outside communicator {}'s {} ranks", peer, comm, members.size()));
      const Rank global = members[static_cast<std::size_t>(peer)];
      if (global == rank_) return fail("a transfer to the rank itself");
      index = code == "send" ? builder_.send(st, peer_index(global), Bytes{bytes}, tag)
                             : builder_.recv(st, peer_index(global), Bytes{bytes}, tag);
      builder_.set_dtype(index, *dtype);
    } else {
      const std::optional<CollectiveKind> kind = parse_collective_kind(code);
      if (!kind) return fail(fmt::format("unknown op code '{}'", code));
      index = builder_.collective(st, slot->second, *kind, Bytes{bytes}, *dtype, peer);
    }
    if (group != 0) builder_.set_group(index, group);
    // The op starts once the host has issued it.
    if (last_host_op_ != kNone) builder_.add_deps({last_host_op_});
    op_ids_[op_id] = index;
    unspent_.insert(op_id);
    return Status::ok();
  }

  Status wait(const json& e) {
    PRISM_ASSIGN_OR_RETURN(const std::int64_t at, field<std::int64_t>(e, "at"));
    PRISM_RETURN_IF_ERROR(host_until(at));
    if (e.contains("op_id")) {
      PRISM_ASSIGN_OR_RETURN(const std::uint32_t id, field<std::uint32_t>(e, "op_id"));
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
    if (e.contains("until") &&
        builder_.role().ops[static_cast<std::size_t>(op)].kind != OpKind::kRecv) {
      polled_.push_back(op);  // a poll: the real wait is not on the wire
    } else {
      // A received tensor is waited for before the host goes on with it:
      // a blocking recv, or irecv's wait before the tensor's first use.
      host_waits_for(op);
    }
    return Status::ok();
  }

  // Polled ops must be done by the next iteration marker.
  void polled_before_marker() {
    pending_deps_.insert(pending_deps_.end(), polled_.begin(), polled_.end());
    polled_.clear();
  }

  Status marker(const json& e) {
    PRISM_ASSIGN_OR_RETURN(const std::int64_t at, field<std::int64_t>(e, "at"));
    PRISM_ASSIGN_OR_RETURN(const std::string kind, field<std::string>(e, "marker"));
    PRISM_RETURN_IF_ERROR(host_until(at));
    const int value = e.value("value", 0);
    if (kind == "iteration_begin" || kind == "iteration_end") {
      polled_before_marker();
      PRISM_RETURN_IF_ERROR(host_until(at));  // the marker comes after the ops polled
      if (kind == "iteration_begin") {
        builder_.marker(kHost, MarkerKind::kIteration, iterations_++);
      } else {
        builder_.marker(kHost, MarkerKind::kIterationEnd, iterations_);
      }
    } else if (kind == "microbatch") {
      builder_.marker(kHost, MarkerKind::kMicrobatch, value);
    } else if (kind == "phase") {
      builder_.marker(kHost, MarkerKind::kPhase, value);
    } else {
      return fail(fmt::format("unknown marker '{}'", kind));
    }
    return Status::ok();
  }

  Status memory(const json& e) {
    PRISM_ASSIGN_OR_RETURN(const std::int64_t at, field<std::int64_t>(e, "at"));
    PRISM_ASSIGN_OR_RETURN(const std::string action, field<std::string>(e, "action"));
    PRISM_ASSIGN_OR_RETURN(const std::uint64_t id, field<std::uint64_t>(e, "id"));
    PRISM_RETURN_IF_ERROR(host_until(at));
    if (action == "alloc") {
      PRISM_ASSIGN_OR_RETURN(const std::int64_t bytes, field<std::int64_t>(e, "bytes"));
      if (bytes < 0 || bytes > kMaxBytes.count)
        return fail(fmt::format("bytes {} outside 0..2^50", bytes));
      if (allocs_.contains(id)) return fail(fmt::format("allocation {} made twice", id));
      allocs_[id] = builder_.alloc(kHost, Bytes{bytes});
    } else if (action == "free") {
      const auto it = allocs_.find(id);
      if (it == allocs_.end()) return fail(fmt::format("free of allocation {}, never made", id));
      builder_.free(kHost, it->second);
      allocs_.erase(it);
    } else {
      return fail(fmt::format("unknown memory action '{}'", action));
    }
    return Status::ok();
  }

  // Compute the rank measured on one of its streams (a GPU's kernels).
  Status compute(const json& e) {
    PRISM_ASSIGN_OR_RETURN(const std::int64_t at, field<std::int64_t>(e, "at"));
    PRISM_ASSIGN_OR_RETURN(const std::int64_t duration, field<std::int64_t>(e, "duration"));
    PRISM_ASSIGN_OR_RETURN(const std::int64_t stream, field<std::int64_t>(e, "stream"));
    if (at < 0 || duration < 0 || duration > kMaxOpDuration.ns)
      return fail(fmt::format("compute at {} ns for {} ns", at, duration));
    builder_.compute(stream_of(stream), SimTime{duration}, e.value("name", std::string("kernels")));
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

Status check_capturable(const JobSpec& job) {
  if (job.has_model)
    return Status::invalid_argument(fmt::format(
        "job '{}' has a model section: its graph comes from the model, not a capture", job.name));
  return Status::ok();
}

Result<RankProgram> program_from_capture(std::string_view capture_json, const std::string& source,
                                         int world_size) {
  json doc;
  try {
    doc = json::parse(capture_json);
  } catch (const json::parse_error& e) {
    return Status::invalid_argument(
        fmt::format("{}: malformed JSON at byte {}: {}", source, e.byte, e.what()));
  }
  return program_from_capture(doc, source, world_size);
}

Result<RankProgram> program_from_capture(const json& doc, const std::string& source,
                                         int world_size) {
  CaptureReader reader(world_size, source);
  return reader.build(doc);
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

}  // namespace prism
