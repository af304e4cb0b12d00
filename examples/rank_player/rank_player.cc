// rank_player: a real program that plays one rank of an execution graph as a
// live rank of `prism emulate`. It keeps the rank's streams the way a GPU
// would: a compute op takes its duration of real time (the player waits it
// out), a communication op is entered with the client library and completes
// when the coordinator says, and dependencies and stream order are honoured.
// Its emulated iteration time should equal the pure replay's (`prism
// simulate`) for the same rank, plus the player's own overhead.
//
//   prism emulate JOB.yaml --real-ranks 0 -- build/bin/rank_player
//
// It reads RANK, WORLD_SIZE, LOCAL_RANK, PRISM_COORDINATOR, PRISM_GRAPH (the
// graph prism emulate wrote) and PRISM_TIMEOUT_MS from the environment, as a
// training program would read torchrun's. Options:
//   --graph FILE        the graph instead of $PRISM_GRAPH
//   --die-after-ops N   kill itself (SIGKILL) after entering N communication
//                       ops: a crashed rank, for fault tests
//   --garbage           connect to the coordinator's Unix socket and send it
//                       an HTTP request instead of the protocol (fault tests)
//   --after-connect CMD run CMD with /bin/sh once connected, before the
//                       first op, and go on when it exits 0 (fault tests:
//                       CMD sees the rank's environment, $PPID is the
//                       player); any other exit fails the rank
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "compute/compute_model.h"
#include "graph/graph.h"
#include "graph/graph_json.h"
#include "prism/client.h"

namespace {

using prism::ExecutionGraph;
using prism::Op;
using prism::OpKind;
using prism::Role;

struct Options {
  std::string graph;
  long die_after_ops = -1;
  bool garbage = false;
  std::string after_connect;
};

// Sends bytes that are not the protocol and waits for the coordinator to
// hang up on them.
int send_garbage() {
  const char* address = std::getenv("PRISM_COORDINATOR");
  if (address == nullptr || std::strncmp(address, "unix:", 5) != 0) return 2;
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", address + 5);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) return 1;
  const char junk[] = "GET / HTTP/1.1\r\nHost: prism\r\n\r\n";
  if (::write(fd, junk, sizeof junk - 1) < 0) return 1;
  char buf[256];
  while (::read(fd, buf, sizeof buf) > 0) {
  }
  ::close(fd);
  return 0;
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

// One rank's streams, played in real time.
class Player {
 public:
  Player(const ExecutionGraph& g, int rank, prism_client* c, long die_after_ops)
      : g_(g), rank_(rank), role_(g.roles[g.role_of_rank[rank]]), c_(c), die_after_(die_after_ops) {
    streams_.resize(role_.streams.size());
    for (std::size_t i = 0; i < role_.ops.size(); ++i)
      streams_[role_.ops[i].stream].ops.push_back(static_cast<int>(i));
    done_.assign(role_.ops.size(), false);
  }

  bool declare_communicators();
  bool run();
  // Real time the player spent between its waits, outside the client's
  // calls: its own bookkeeping, which the rank's virtual time includes.
  std::int64_t overhead_ns() const { return outside_.count() - in_calls_.count(); }
  std::int64_t ops() const { return static_cast<std::int64_t>(role_.ops.size()); }

 private:
  struct Stream {
    std::vector<int> ops;
    std::size_t pos = 0;
    int in_flight = 0;      // communication ops entered, not completed
    int computing = -1;     // the compute op running, or -1
    std::int64_t ends = 0;  // when it ends (virtual ns)
    bool idle() const { return in_flight == 0 && computing < 0; }
  };

  bool deps_done(const Op& op) const {
    for (std::uint32_t i = op.deps_begin; i < op.deps_end; ++i)
      if (!done_[role_.deps[i]]) return false;
    return true;
  }
  bool start_ready(int st, bool* changed);
  bool start(int st, int oi, bool* changed);
  bool enter(int st, int oi);
  std::int64_t duration(const Op& op) const;
  bool fail(const char* what) {
    std::fprintf(stderr, "rank_player: rank %d: %s: %s\n", rank_, what, prism_last_error(c_));
    return false;
  }

  const ExecutionGraph& g_;
  int rank_;
  const Role& role_;
  prism_client* c_;
  long die_after_;
  long entered_ = 0;
  std::vector<Stream> streams_;
  std::vector<bool> done_;
  std::map<std::uint64_t, std::pair<int, int>> tickets_;  // ticket -> (stream, op)
  std::uint32_t world_comm_ = 0;
  std::chrono::nanoseconds outside_{0};   // between waits
  std::chrono::nanoseconds in_calls_{0};  // in prism_* calls between waits
};

using Clock = std::chrono::steady_clock;

// Times a client call made between waits.
template <typename F>
prism_status timed(std::chrono::nanoseconds* total, F call) {
  const Clock::time_point t0 = Clock::now();
  const prism_status s = call();
  *total += Clock::now() - t0;
  return s;
}

// One communicator per group slot the role's collectives use (handle = slot),
// and one of the whole world for sends and receives.
bool Player::declare_communicators() {
  const prism::SlotResolver res = g_.resolver();
  std::map<int, bool> slots;
  for (const Op& op : role_.ops)
    if (op.kind == OpKind::kCollective) slots[op.ref] = true;
  std::vector<prism::Rank> members;
  for (const auto& [slot, used] : slots) {
    res.members(slot, rank_, &members);
    if (prism_comm_init(c_, static_cast<std::uint32_t>(slot), static_cast<int>(members.size()),
                        res.index_in_group(slot, rank_), members.data(), 0) != PRISM_OK)
      return fail("comm_init");
  }
  world_comm_ = static_cast<std::uint32_t>(g_.slots.size());
  std::vector<std::int32_t> world(g_.world_size());
  for (int r = 0; r < g_.world_size(); ++r) world[r] = r;
  if (prism_comm_init(c_, world_comm_, g_.world_size(), rank_, world.data(), 0) != PRISM_OK)
    return fail("comm_init");
  return true;
}

std::int64_t Player::duration(const Op& op) const {
  static const prism::RooflineModel roofline;
  const prism::SimTime d =
      op.cost == prism::kNone ? op.duration : roofline.duration(role_.costs[op.cost]);
  return prism::scale_duration(d, g_.compute_scale_ppm(rank_)).ns;
}

bool Player::enter(int st, int oi) {
  const Op& op = role_.ops[oi];
  prism_op w{};
  w.stream = op.stream;
  w.dtype = static_cast<std::uint8_t>(op.dtype);
  w.bytes = op.bytes.count;
  w.group = op.group;
  if (op.kind == OpKind::kCollective) {
    w.comm = static_cast<std::uint32_t>(op.ref);
    w.code = static_cast<std::uint8_t>(op.collective);
    w.peer = op.arg;  // the root of a broadcast or reduce
  } else {
    w.comm = world_comm_;
    w.code = op.kind == OpKind::kSend ? PRISM_SEND : PRISM_RECV;
    w.peer = g_.resolver().peer(op.ref, rank_);
    w.tag = op.arg;
  }
  std::uint64_t ticket = 0;
  if (timed(&in_calls_, [&] { return prism_enter(c_, &w, &ticket); }) != PRISM_OK)
    return fail("enter");
  tickets_[ticket] = {st, oi};
  ++streams_[st].in_flight;
  if (++entered_ == die_after_) ::raise(SIGKILL);
  return true;
}

// Starts op `oi` of stream `st`; instantaneous ops are done at once.
bool Player::start(int st, int oi, bool* changed) {
  const Op& op = role_.ops[oi];
  Stream& s = streams_[st];
  *changed = true;
  switch (op.kind) {
    case OpKind::kCompute:
      s.computing = oi;
      s.ends = prism_now(c_) + duration(op);
      return true;
    case OpKind::kCollective:
    case OpKind::kSend:
    case OpKind::kRecv:
      return enter(st, oi);
    case OpKind::kAlloc:
      if (timed(&in_calls_, [&] {
            return prism_memory(c_, 0, static_cast<std::uint64_t>(oi), op.bytes.count, op.stream);
          }) != PRISM_OK)
        return fail("memory");
      break;
    case OpKind::kFree:
      if (timed(&in_calls_, [&] {
            return prism_memory(c_, 1, static_cast<std::uint64_t>(op.ref),
                                role_.ops[op.ref].bytes.count, op.stream);
          }) != PRISM_OK)
        return fail("memory");
      break;
    case OpKind::kMarker:
      if (timed(&in_calls_, [&] {
            return prism_marker(c_,
                                op.marker == prism::MarkerKind::kIteration    ? 0
                                : op.marker == prism::MarkerKind::kMicrobatch ? 2
                                                                              : 3,
                                op.arg);
          }) != PRISM_OK)
        return fail("marker");
      break;
    case OpKind::kEventRecord:
    case OpKind::kEventWait:
      break;
  }
  done_[oi] = true;
  return true;
}

// Starts what stream `st` can start now: ops in order, an NCCL group at once.
bool Player::start_ready(int st, bool* changed) {
  Stream& s = streams_[st];
  while (s.idle() && s.pos < s.ops.size()) {
    const Op& first = role_.ops[s.ops[s.pos]];
    std::size_t end = s.pos + 1;
    if (first.group != 0)
      while (end < s.ops.size() && role_.ops[s.ops[end]].group == first.group) ++end;
    for (std::size_t i = s.pos; i < end; ++i)
      if (!deps_done(role_.ops[s.ops[i]])) return true;
    const std::size_t begin = s.pos;
    s.pos = end;
    for (std::size_t i = begin; i < end; ++i)
      if (!start(st, s.ops[i], changed)) return false;
  }
  return true;
}

bool Player::run() {
  for (Clock::time_point woke = Clock::now();;) {
    for (bool changed = true; changed;) {
      changed = false;
      for (int st = 0; st < static_cast<int>(streams_.size()); ++st)
        if (!start_ready(st, &changed)) return false;
    }
    std::int64_t next = PRISM_NO_LIMIT;
    bool busy = !tickets_.empty();
    for (const Stream& s : streams_) {
      if (s.computing >= 0) next = std::min(next, s.ends);
      busy = busy || s.computing >= 0 || s.pos < s.ops.size();
    }
    if (!busy) {
      outside_ += Clock::now() - woke;
      return true;
    }
    if (next == PRISM_NO_LIMIT && tickets_.empty()) {
      std::fprintf(stderr, "rank_player: rank %d: stuck: nothing running, ops left\n", rank_);
      return false;
    }
    std::uint64_t ticket = PRISM_NO_TICKET;
    outside_ += Clock::now() - woke;
    if (prism_wait_any(c_, next, &ticket) != PRISM_OK) return fail("wait");
    woke = Clock::now();
    if (ticket != PRISM_NO_TICKET) {
      const auto [st, oi] = tickets_.at(ticket);
      tickets_.erase(ticket);
      done_[oi] = true;
      --streams_[st].in_flight;
    }
    const std::int64_t now = prism_now(c_);
    for (int st = 0; st < static_cast<int>(streams_.size()); ++st) {
      Stream& s = streams_[st];
      if (s.computing < 0 || s.ends > now) continue;
      const Op& op = role_.ops[s.computing];
      const std::string name = op.name == prism::kNone ? "compute" : role_.names[op.name];
      if (timed(&in_calls_, [&] {
            return prism_compute(c_, static_cast<std::uint16_t>(st), duration(op), name.c_str());
          }) != PRISM_OK)
        return fail("compute");
      done_[s.computing] = true;
      s.computing = -1;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (const char* g = std::getenv("PRISM_GRAPH")) o.graph = g;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--graph") == 0 && i + 1 < argc) {
      o.graph = argv[++i];
    } else if (std::strcmp(argv[i], "--die-after-ops") == 0 && i + 1 < argc) {
      o.die_after_ops = std::atol(argv[++i]);
    } else if (std::strcmp(argv[i], "--garbage") == 0) {
      o.garbage = true;
    } else if (std::strcmp(argv[i], "--after-connect") == 0 && i + 1 < argc) {
      o.after_connect = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: rank_player [--graph FILE] [--die-after-ops N] [--garbage] "
                   "[--after-connect CMD]\n");
      return 2;
    }
  }
  if (o.garbage) return send_garbage();
  if (o.graph.empty()) {
    std::fprintf(stderr, "rank_player: no graph: set PRISM_GRAPH or pass --graph FILE\n");
    return 2;
  }
  prism::Result<ExecutionGraph> g = prism::load_graph(o.graph);
  if (!g.is_ok()) {
    std::fprintf(stderr, "rank_player: %s\n", g.status().message().c_str());
    return 1;
  }
  const int rank = env_int("RANK", 0);
  const int world = env_int("WORLD_SIZE", g.value().world_size());
  if (world != g.value().world_size() || rank < 0 || rank >= world) {
    std::fprintf(stderr, "rank_player: rank %d of %d does not fit the graph's %d ranks\n", rank,
                 world, g.value().world_size());
    return 1;
  }
  prism_client* c = nullptr;
  if (prism_connect(nullptr, rank, world, env_int("LOCAL_RANK", 0), "rank_player",
                    env_int("PRISM_TIMEOUT_MS", 0), &c) != PRISM_OK) {
    std::fprintf(stderr, "rank_player: rank %d: %s\n", rank, prism_last_error(c));
    prism_close(c, 1);
    return 1;
  }
  if (!o.after_connect.empty()) {
    std::fflush(stdout);
    const int status = std::system(o.after_connect.c_str());
    if (status != 0) {
      std::fprintf(stderr, "rank_player: rank %d: --after-connect command failed (status %d)\n",
                   rank, status);
      prism_close(c, 1);
      return 1;
    }
  }
  Player p(g.value(), rank, c, o.die_after_ops);
  const bool ok = p.declare_communicators() && p.run();
  prism_stats stats{};
  prism_get_stats(c, &stats);
  const std::int64_t end = prism_now(c);
  const prism_status bye = prism_close(c, ok ? 0 : 1);
  // After the goodbye, so that printing is not part of the rank's time.
  std::printf(
      "rank_player: rank %d: %s at %.6f s of virtual time; %lld ops, player overhead "
      "%.3f ms (%.0f ns per op); not counted: %llu messages taking %.3f ms to send, "
      "%.3f ms of late answers\n",
      rank, ok ? "done" : "failed", static_cast<double>(end) / 1e9, static_cast<long long>(p.ops()),
      p.overhead_ns() / 1e6,
      static_cast<double>(p.overhead_ns()) /
          static_cast<double>(std::max<std::int64_t>(p.ops(), 1)),
      static_cast<unsigned long long>(stats.messages), stats.overhead_ns / 1e6,
      stats.late_ns / 1e6);
  return ok && bye == PRISM_OK ? 0 : 1;
}
