#include "report/chrome_trace.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "report/op_label.h"

namespace prism {
namespace {

using Json = nlohmann::ordered_json;

// Events one per line, so traces diff well.
class EventWriter {
 public:
  void add(const Json& event) {
    if (!first_) out_.append(",\n");
    first_ = false;
    out_.append(event.dump(-1, ' ', false, Json::error_handler_t::replace));
  }
  std::string finish() && {
    if (!first_) out_.push_back('\n');
    return "{\"traceEvents\":[\n" + out_ + "],\n\"displayTimeUnit\":\"ns\"}\n";
  }

 private:
  bool first_ = true;
  std::string out_;
};

Json metadata(const char* what, Rank pid, int tid, Json args) {
  return Json{{"name", what}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}};
}

// The threads of a traced rank past its streams.
struct Tracks {
  int events = 0;      // zero-length ops
  int iterations = 0;  // iteration spans
  int host = 0;        // a real rank's reported compute and waits
};

Tracks tracks_of(const Role& role) {
  const int s = static_cast<int>(role.streams.size());
  return Tracks{s, s + 1, s + 2};
}

void add_thread(Rank rank, int tid, const std::string& name, EventWriter* out) {
  out->add(metadata("thread_name", rank, tid, Json{{"name", name}}));
  out->add(metadata("thread_sort_index", rank, tid, Json{{"sort_index", tid}}));
}

// Process and thread names of every traced rank, by rank then thread.
void append_metadata(const ExecutionGraph& g, const std::vector<Rank>& ranks,
                     const std::vector<Rank>& with_host, const TraceOptions& o, EventWriter* out) {
  for (Rank rank : ranks) {
    const Role& role = g.roles[g.role_of_rank[rank]];
    const bool real = std::binary_search(o.real_ranks.begin(), o.real_ranks.end(), rank);
    const char* kind = real ? "real" : "virtual";
    const std::string name = fmt::format("rank {} ({}, {})", rank, role.name, kind);
    out->add(metadata("process_name", rank, 0, Json{{"name", name}}));
    out->add(metadata("process_labels", rank, 0, Json{{"labels", kind}}));
    out->add(metadata("process_sort_index", rank, 0, Json{{"sort_index", rank}}));
    const Tracks t = tracks_of(role);
    if (o.level != TraceLevel::kIterations) {
      for (std::size_t s = 0; s < role.streams.size(); ++s)
        add_thread(rank, static_cast<int>(s), role.streams[s], out);
    }
    if (o.level == TraceLevel::kOps) add_thread(rank, t.events, "events", out);
    add_thread(rank, t.iterations, "iterations", out);
    if (std::binary_search(with_host.begin(), with_host.end(), rank))
      add_thread(rank, t.host, "host", out);
  }
}

// Communicator, peers, size and the wait for peers of a collective or send/recv.
void add_comm_args(const ExecutionGraph& g, const TraceRecord& rec, const Op& op, Json* args) {
  const SlotResolver res = g.resolver();
  (*args)["communicator"] = g.slots[op.ref].name;
  if (op.kind == OpKind::kCollective) {
    std::vector<Rank> members;
    res.members(op.ref, rec.rank, &members);
    (*args)["collective"] = to_string(op.collective);
    (*args)["group"] = res.group_id(op.ref, rec.rank);
    if (op.collective == CollectiveKind::kBroadcast || op.collective == CollectiveKind::kReduce)
      (*args)["root"] = members.at(static_cast<std::size_t>(op.arg));
    (*args)["peers"] = members;
  } else {
    (*args)["peer"] = res.peer(op.ref, rec.rank);
    (*args)["tag"] = op.arg;
  }
  (*args)["bytes"] = op.bytes.count;
  (*args)["dtype"] = to_string(op.dtype);
  if (op.group != 0) (*args)["nccl_group"] = op.group;
  (*args)["wait_us"] = to_micros(rec.transfer_start - rec.start);
}

Json op_args(const ExecutionGraph& g, const Role& role, const TraceRecord& rec) {
  const Op& op = role.ops[rec.op];
  Json args{{"op", rec.op}};
  switch (op.kind) {
    case OpKind::kCollective:
    case OpKind::kSend:
    case OpKind::kRecv:
      add_comm_args(g, rec, op, &args);
      break;
    case OpKind::kCompute:
      if (op.cost != kNone) {
        const KernelCost& cost = role.costs[op.cost];
        args["kernel_class"] = to_string(cost.kernel_class);
        args["flops"] = cost.flops;
        args["bytes_accessed"] = cost.bytes_accessed.count;
      }
      break;
    case OpKind::kAlloc:
      args["bytes"] = op.bytes.count;
      break;
    case OpKind::kFree:
      args["alloc_op"] = op.ref;
      args["bytes"] = op.bytes.count;
      break;
    case OpKind::kEventRecord:
    case OpKind::kEventWait:
      args["event"] = role.events[op.ref];
      break;
    case OpKind::kMarker:
      args["marker"] = to_string(op.marker);
      args["index"] = op.arg;
      break;
  }
  return args;
}

std::string event_name(const Role& role, const Op& op) {
  if (op.kind == OpKind::kMarker) {
    if (op.name == kNone) return fmt::format("{} {}", to_string(op.marker), op.arg);
    return fmt::format("{} {}", op_label(role, op), op.arg);
  }
  return std::string(op_label(role, op));
}

// An op with a duration: a slice on its stream's thread. A zero-length one
// (alloc, free, event, marker): an instant event on the rank's events thread.
Json trace_event(const ExecutionGraph& g, const TraceRecord& rec) {
  const Role& role = g.roles[rec.role];
  const Op& op = role.ops[rec.op];
  Json e{{"name", event_name(role, op)}, {"cat", to_string(op.kind)}};
  Json args = op_args(g, role, rec);
  int tid = rec.stream;
  if (rec.end == rec.start) {
    e["ph"] = "i";
    e["s"] = "t";  // scoped to the events thread
    e["ts"] = to_micros(rec.start);
    tid = tracks_of(role).events;
    args["stream"] = role.streams[rec.stream];
  } else {
    e["ph"] = "X";
    e["ts"] = to_micros(rec.start);
    e["dur"] = to_micros(rec.end - rec.start);
  }
  e["pid"] = rec.rank;
  e["tid"] = tid;
  e["args"] = std::move(args);
  return e;
}

Json slice(std::string name, const char* cat, SimTime start, SimTime end, Rank pid, int tid,
           Json args) {
  return Json{
      {"name", std::move(name)},       {"cat", cat}, {"ph", "X"},  {"ts", to_micros(start)},
      {"dur", to_micros(end - start)}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}};
}

// One stream's ops within one segment of a rank's timeline (between two of
// its markers).
struct Segment {
  int ops = 0;
  std::int32_t first_op = 0, last_op = 0;
  SimTime start, end;
  SimTime compute, communication, wait;  // time in compute ops, in communication ops, waiting
};

// The phases level of one rank's records: the rank's markers (iteration,
// micro-batch, phase) cut its timeline into segments; each stream's ops in a
// segment become one slice named after the marker that began it.
void append_phases(const ExecutionGraph& g, const TraceRecord* begin, const TraceRecord* end,
                   EventWriter* out) {
  const Role& role = g.roles[begin->role];
  std::vector<Segment> open(role.streams.size());
  std::string label = "start";
  auto flush = [&] {
    for (std::size_t s = 0; s < open.size(); ++s) {
      Segment& seg = open[s];
      if (seg.ops == 0) continue;
      out->add(slice(label, "phase", seg.start, seg.end, begin->rank, static_cast<int>(s),
                     Json{{"ops", seg.ops},
                          {"first_op", seg.first_op},
                          {"last_op", seg.last_op},
                          {"compute_us", to_micros(seg.compute)},
                          {"communication_us", to_micros(seg.communication)},
                          {"wait_us", to_micros(seg.wait)}}));
      seg = Segment{};
    }
  };
  for (const TraceRecord* rec = begin; rec != end; ++rec) {
    const Op& op = role.ops[rec->op];
    if (op.kind == OpKind::kMarker) {
      flush();
      label = event_name(role, op);
      continue;
    }
    if (rec->end == rec->start) continue;
    Segment& seg = open[rec->stream];
    if (seg.ops == 0) {
      seg.first_op = rec->op;
      seg.start = rec->start;
    }
    ++seg.ops;
    seg.last_op = rec->op;
    seg.end = std::max(seg.end, rec->end);
    if (op.kind == OpKind::kCompute) {
      seg.compute += rec->end - rec->start;
    } else if (is_communication(op.kind)) {
      seg.wait += rec->transfer_start - rec->start;
      seg.communication += rec->end - rec->transfer_start;
    } else {
      seg.wait += rec->end - rec->start;  // an event wait
    }
  }
  flush();
}

Json iteration_span(Rank rank, int tid, std::int32_t index, SimTime from, SimTime to) {
  return slice(fmt::format("iteration {}", index), "iteration", from, to, rank, tid,
               Json{{"index", index}});
}

// One span "iteration N" per iteration of a rank: from its iteration marker
// to the next one, its iteration-end marker or the rank's last op's end.
// False when its records hold no iteration marker.
bool append_iterations(const ExecutionGraph& g, const TraceRecord* begin, const TraceRecord* end,
                       SimTime rank_end, EventWriter* out) {
  const Role& role = g.roles[begin->role];
  const int tid = tracks_of(role).iterations;
  bool open = false, any = false;
  std::int32_t index = 0;
  SimTime since;
  auto close = [&](SimTime at) {
    if (!open) return;
    out->add(iteration_span(begin->rank, tid, index, since, at));
    open = false;
  };
  for (const TraceRecord* rec = begin; rec != end; ++rec) {
    const Op& op = role.ops[rec->op];
    if (op.kind != OpKind::kMarker) continue;
    if (op.marker == MarkerKind::kIteration) {
      close(rec->start);
      open = any = true;
      index = op.arg;
      since = rec->start;
    } else if (op.marker == MarkerKind::kIterationEnd) {
      close(rec->start);
    }
  }
  close(rank_end);
  return any;
}

// The iterations of a rank whose markers are no records (an emulation's
// real rank: it reports them, the replay keeps them in its timeline),
// numbered from 0: each complete iteration from its begin marker to the
// next, the last to the end marker or the rank's finish.
void append_timeline_iterations(const RankTimeline& t, int tid, EventWriter* out) {
  const std::vector<SimTime> begins = t.iteration_marks.complete();
  for (std::size_t i = 0; i < begins.size(); ++i) {
    const SimTime to = i + 1 < begins.size() ? begins[i + 1] : t.iteration_marks.last_end(t.finish);
    out->add(iteration_span(t.rank, tid, static_cast<std::int32_t>(i), begins[i], to));
  }
}

// A real rank's host thread: the compute it reported (overlapping intervals
// merged) and the waits between, up to `rank_end`.
void append_host(Rank rank, int tid, std::vector<std::pair<SimTime, SimTime>> computed,
                 SimTime rank_end, EventWriter* out) {
  std::sort(computed.begin(), computed.end());
  SimTime at;
  std::size_t i = 0;
  while (i < computed.size()) {
    SimTime start = computed[i].first, end = computed[i].second;
    int count = 0;
    for (; i < computed.size() && computed[i].first <= end; ++i, ++count)
      end = std::max(end, computed[i].second);
    if (start > at) out->add(slice("wait", "wait", at, start, rank, tid, Json::object()));
    out->add(slice("compute", "compute", start, end, rank, tid, Json{{"intervals", count}}));
    at = end;
  }
  if (rank_end > at) out->add(slice("wait", "wait", at, rank_end, rank, tid, Json::object()));
}

// Bytes as MiB, rounded to a thousandth (about a KiB).
double mib(Bytes b) {
  return std::round(static_cast<double>(b.count) / (1 << 20) * 1000.0) / 1000.0;
}

}  // namespace

Result<TraceLevel> parse_trace_level(std::string_view text) {
  for (TraceLevel l : {TraceLevel::kOps, TraceLevel::kPhases, TraceLevel::kIterations})
    if (text == to_string(l)) return l;
  return Status::invalid_argument(fmt::format(
      "--trace-level: unknown level '{}': valid levels are ops, phases and iterations", text));
}

std::string_view to_string(TraceLevel level) {
  switch (level) {
    case TraceLevel::kOps:
      return "ops";
    case TraceLevel::kPhases:
      return "phases";
    case TraceLevel::kIterations:
      return "iterations";
  }
  return "ops";
}

// A node failure (--fail-node): a global instant event when it fails, and
// on each traced rank blocked in a communication op, that op as a slice
// that begins when the rank arrived and never ends (a "B" without its "E":
// Perfetto shows it running to the end of the trace, "did not end").
void append_failure(const ExecutionGraph& g, const ReplayResult& r, const std::vector<Rank>& ranks,
                    EventWriter* out) {
  const NodeFailureReplay& f = *r.failure;
  out->add(Json{{"name", fmt::format("node {} fails", f.node)},
                {"cat", "what-if"},
                {"ph", "i"},
                {"s", "g"},
                {"ts", to_micros(f.at)},
                {"pid", ranks.empty() ? 0 : ranks.front()},
                {"tid", 0},
                {"args", Json{{"node", f.node}, {"ranks", f.ranks}}}});
  for (const BlockedRank& b : r.blocked) {
    if (b.since.ns < 0 || !std::binary_search(ranks.begin(), ranks.end(), b.rank)) continue;
    const Role& role = g.roles[b.role];
    out->add(Json{{"name", fmt::format("{} (never completes)", event_name(role, role.ops[b.op]))},
                  {"cat", "blocked"},
                  {"ph", "B"},
                  {"ts", to_micros(b.since)},
                  {"pid", b.rank},
                  {"tid", b.stream},
                  {"args", Json{{"waiting_for", b.waiting_for}}}});
  }
}

std::string format_chrome_trace(const ExecutionGraph& g, const ReplayResult& replayed,
                                const std::vector<MeasuredSlice>& measured,
                                const TraceOptions& options) {
  // Only options.ranks, when given: the records, samples and timelines of
  // the others dropped from a copy.
  ReplayResult kept;
  if (!options.ranks.empty()) {
    auto in = [&](Rank rank) {
      return std::binary_search(options.ranks.begin(), options.ranks.end(), rank);
    };
    std::copy_if(replayed.trace.begin(), replayed.trace.end(), std::back_inserter(kept.trace),
                 [&](const TraceRecord& t) { return in(t.rank); });
    std::copy_if(replayed.memory_trace.begin(), replayed.memory_trace.end(),
                 std::back_inserter(kept.memory_trace),
                 [&](const MemorySample& m) { return in(m.rank); });
    std::copy_if(replayed.timelines.begin(), replayed.timelines.end(),
                 std::back_inserter(kept.timelines),
                 [&](const RankTimeline& t) { return in(t.rank); });
  }
  const ReplayResult& r = options.ranks.empty() ? replayed : kept;
  std::vector<Rank> ranks;
  for (const TraceRecord& rec : r.trace) ranks.push_back(rec.rank);
  for (const MeasuredSlice& m : measured) ranks.push_back(m.rank);
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  // Real ranks with reported compute get a host thread.
  std::vector<Rank> with_host;
  if (options.level != TraceLevel::kIterations) {
    for (const MeasuredSlice& m : measured)
      if (std::binary_search(options.real_ranks.begin(), options.real_ranks.end(), m.rank))
        with_host.push_back(m.rank);
    std::sort(with_host.begin(), with_host.end());
    with_host.erase(std::unique(with_host.begin(), with_host.end()), with_host.end());
  }

  EventWriter out;
  append_metadata(g, ranks, with_host, options, &out);
  // Records are sorted by rank: one rank's at a time.
  const TraceRecord* const all = r.trace.data();
  std::map<Rank, std::vector<SimTime>> marker_times;  // each rank's, ascending
  for (std::size_t b = 0, e = 0; b < r.trace.size(); b = e) {
    SimTime rank_end;
    std::vector<SimTime>& markers = marker_times[r.trace[b].rank];
    for (e = b; e < r.trace.size() && r.trace[e].rank == r.trace[b].rank; ++e) {
      const TraceRecord& rec = r.trace[e];
      rank_end = std::max(rank_end, rec.end);
      if (g.roles[rec.role].ops[rec.op].kind == OpKind::kMarker) markers.push_back(rec.start);
    }
    for (const MeasuredSlice& m : measured)
      if (m.rank == r.trace[b].rank) rank_end = std::max(rank_end, m.end);
    switch (options.level) {
      case TraceLevel::kOps:
        for (std::size_t i = b; i < e; ++i) out.add(trace_event(g, r.trace[i]));
        break;
      case TraceLevel::kPhases:
        append_phases(g, all + b, all + e, &out);
        break;
      case TraceLevel::kIterations:
        break;
    }
    if (!append_iterations(g, all + b, all + e, rank_end, &out)) {
      const Rank rank = r.trace[b].rank;
      for (const RankTimeline& t : r.timelines)
        if (t.rank == rank)
          append_timeline_iterations(t, tracks_of(g.roles[r.trace[b].role]).iterations, &out);
    }
  }
  if (options.level != TraceLevel::kIterations) {
    for (const MeasuredSlice& m : measured) {
      out.add(slice(m.name, "compute", m.start, m.end, m.rank, m.stream, Json{{"measured", true}}));
    }
    for (Rank rank : with_host) {
      std::vector<std::pair<SimTime, SimTime>> computed;
      SimTime rank_end;
      for (const MeasuredSlice& m : measured) {
        if (m.rank != rank) continue;
        computed.emplace_back(m.start, m.end);
        rank_end = std::max(rank_end, m.end);
      }
      for (const TraceRecord& rec : r.trace)
        if (rec.rank == rank) rank_end = std::max(rank_end, rec.end);
      const Role& role = g.roles[g.role_of_rank[rank]];
      append_host(rank, tracks_of(role).host, std::move(computed), rank_end, &out);
    }
  }
  if (replayed.failure) append_failure(g, replayed, ranks, &out);
  // Memory counters of the same ranks: one track per rank, MiB. Below the
  // ops level, per segment between two markers of the rank, only its first
  // sample, its highest (allocated) and its last.
  for (std::size_t b = 0, e = 0; b < r.memory_trace.size(); b = e) {
    const Rank rank = r.memory_trace[b].rank;
    for (e = b; e < r.memory_trace.size() && r.memory_trace[e].rank == rank; ++e) {
    }
    if (!std::binary_search(ranks.begin(), ranks.end(), rank)) continue;
    std::vector<std::size_t> kept;
    if (options.level == TraceLevel::kOps) {
      for (std::size_t i = b; i < e; ++i) kept.push_back(i);
    } else {
      const std::vector<SimTime>& cuts = marker_times[rank];
      std::size_t i = b;
      for (std::size_t c = 0; i < e; ++c) {
        // Samples before cut c (all that remain after the last cut).
        std::size_t j = i, peak = i;
        for (; j < e && (c >= cuts.size() || r.memory_trace[j].at < cuts[c]); ++j)
          if (r.memory_trace[j].allocated > r.memory_trace[peak].allocated) peak = j;
        if (j == i) continue;
        for (std::size_t k : {i, peak, j - 1})
          if (kept.empty() || k > kept.back()) kept.push_back(k);
        i = j;
      }
    }
    for (std::size_t i : kept) {
      const MemorySample& m = r.memory_trace[i];
      out.add(Json{{"name", "memory (MiB)"},
                   {"ph", "C"},
                   {"ts", to_micros(m.at)},
                   {"pid", m.rank},
                   {"args", Json{{"allocated", mib(m.allocated)},
                                 {"reserved", mib(m.reserved)},
                                 {"device", mib(m.device)}}}});
    }
  }
  return std::move(out).finish();
}

}  // namespace prism
