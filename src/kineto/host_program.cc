// A trace without GPU activity (a CPU-only run): one stream per host thread;
// each top-level operator is a compute op of its measured duration, or, when
// it holds record_param_comms calls with collective metadata, those calls as
// communication. Annotations (ProfilerStep#N, user annotations, Python
// functions) only group operators: their children count as top level.
#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "kineto/convert.h"
#include "kineto/program_builder.h"

namespace prism::kineto {
namespace {

struct Node {
  const TraceEvent* e;
  std::vector<int> children;
};

bool transparent(const TraceEvent& e) {
  return e.cls == EventClass::kAnnotation || e.name.starts_with("ProfilerStep#");
}

bool is_comm_call(const TraceEvent& e) {
  return e.name == "record_param_comms" && has_comm_metadata(e.args);
}

bool looks_like_comm(std::string_view name) {
  return name.starts_with("c10d::") || name.starts_with("gloo:") || name.starts_with("nccl:") ||
         name == "record_param_comms";
}

class HostConverter {
 public:
  HostConverter(const ParsedTrace& t, const CommContext& ctx, KinetoTrace* out)
      : t_(t), ctx_(ctx), out_(out), b_(t.source, ctx.rank) {}

  Status run(const KinetoTraceOptions& options) {
    std::map<std::string, std::vector<const TraceEvent*>> by_thread;
    for (const TraceEvent& e : t_.events) {
      if (e.cls == EventClass::kHostOp || e.cls == EventClass::kAnnotation)
        by_thread[e.thread].push_back(&e);
    }
    if (by_thread.empty()) {
      return Status::invalid_argument(t_.source +
                                      ": no GPU activity and no host operators: nothing to import");
    }
    if (by_thread.size() > kMaxStreams) {
      return Status::invalid_argument(fmt::format("{}: {} host threads; at most {} are supported",
                                                  t_.source, by_thread.size(), kMaxStreams));
    }
    // Streams in order of each thread's first event: the main thread first.
    std::vector<std::tuple<std::int64_t, std::string>> threads;
    for (auto& [thread, events] : by_thread) {
      std::stable_sort(events.begin(), events.end(), [](const TraceEvent* a, const TraceEvent* b) {
        return std::make_tuple(a->ts_ns, -a->dur_ns) < std::make_tuple(b->ts_ns, -b->dur_ns);
      });
      threads.emplace_back(events.front()->ts_ns, thread);
    }
    std::sort(threads.begin(), threads.end());
    std::map<std::string, int> stream_of;
    for (const auto& [first, thread] : threads)
      stream_of[thread] = b_.add_stream(fmt::format("host{}", stream_of.size()));
    for (const auto& [thread, events] : by_thread)
      PRISM_RETURN_IF_ERROR(add_thread(events, stream_of.at(thread)));

    const std::vector<Step> steps = profiler_steps(t_);
    const int main = steps.empty() ? 0 : stream_of.at(steps.front().event->thread);
    add_markers(steps, main, &b_);
    if (options.memory) PRISM_RETURN_IF_ERROR(add_memory(t_, -1, main, &b_, &out_->summary));
    out_->program = std::move(b_).finish(&out_->summary);
    return Status::ok();
  }

 private:
  // `events` sorted by (start, longest first): parents come before children.
  Status add_thread(const std::vector<const TraceEvent*>& events, int stream) {
    nodes_.clear();
    std::vector<int> roots;
    std::vector<int> open;
    for (const TraceEvent* e : events) {
      while (!open.empty()) {
        const TraceEvent& top = *nodes_[static_cast<std::size_t>(open.back())].e;
        const bool inside =
            e->end_ns() <= top.end_ns() && (e->ts_ns < top.end_ns() || e->ts_ns == top.ts_ns);
        if (inside) break;
        open.pop_back();
      }
      const int id = static_cast<int>(nodes_.size());
      nodes_.push_back(Node{e, {}});
      (open.empty() ? roots : nodes_[static_cast<std::size_t>(open.back())].children).push_back(id);
      open.push_back(id);
    }
    stream_ = stream;
    seq_ = 0;
    for (int r : roots) PRISM_RETURN_IF_ERROR(visit(r));
    return Status::ok();
  }

  Status visit(int id) {
    const Node& n = nodes_[static_cast<std::size_t>(id)];
    if (transparent(*n.e)) {
      for (int c : n.children) PRISM_RETURN_IF_ERROR(visit(c));
      return Status::ok();
    }
    std::vector<const TraceEvent*> calls;
    bool comm_named = false;
    collect(id, &calls, &comm_named);
    if (calls.empty()) {
      if (comm_named) ++out_->summary.comm_calls_without_metadata;
      Pending p = pending(*n.e);
      p.op.kind = OpKind::kCompute;
      p.op.duration = SimTime{n.e->dur_ns};
      b_.add(std::move(p));
      return Status::ok();
    }
    for (const TraceEvent* call : calls) PRISM_RETURN_IF_ERROR(add_comm(*call, n.e->name));
    return Status::ok();
  }

  void collect(int id, std::vector<const TraceEvent*>* calls, bool* comm_named) const {
    const Node& n = nodes_[static_cast<std::size_t>(id)];
    if (is_comm_call(*n.e)) calls->push_back(n.e);
    if (looks_like_comm(n.e->name)) *comm_named = true;
    for (int c : n.children) collect(c, calls, comm_named);
  }

  Pending pending(const TraceEvent& e) {
    Pending p;
    p.key_ns = e.ts_ns;
    p.seq = seq_++;
    p.event = e.index;
    p.name = std::string(e.name);
    p.op.stream = static_cast<std::uint16_t>(stream_);
    return p;
  }

  Status add_comm(const TraceEvent& call, std::string_view op_name) {
    const std::string at = where(t_.source, call);
    PRISM_ASSIGN_OR_RETURN(const CommCall c, read_comm_call(call.args, nullptr, {}, ctx_, at));
    Pending p = pending(call);
    p.name = std::string(op_name);
    PRISM_RETURN_IF_ERROR(b_.set_comm(c, at, &p.op));
    b_.add(std::move(p));
    return Status::ok();
  }

  const ParsedTrace& t_;
  const CommContext& ctx_;
  KinetoTrace* out_;
  ProgramBuilder b_;
  std::vector<Node> nodes_;  // the current thread's
  int stream_ = 0;
  std::int64_t seq_ = 0;
};

}  // namespace

Status host_program(const ParsedTrace& t, const CommContext& ctx, const KinetoTraceOptions& options,
                    KinetoTrace* out) {
  HostConverter c(t, ctx, out);
  return c.run(options);
}

}  // namespace prism::kineto
