// A trace with GPU activity: one stream per CUDA stream, its kernels, memcpys
// and memsets in execution order with their measured durations; NCCL
// kernels as communication; "Stream Wait Event" records as event
// record/wait pairs; host annotations and memory on the main stream.
#include <algorithm>
#include <limits>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

#include "kineto/convert.h"
#include "kineto/program_builder.h"

namespace prism::kineto {
namespace {

bool is_gpu(const TraceEvent& e) {
  return e.cls == EventClass::kKernel || e.cls == EventClass::kGpuCopy;
}

class DeviceConverter {
 public:
  DeviceConverter(const ParsedTrace& t, const CommContext& ctx, KinetoTrace* out)
      : t_(t), ctx_(ctx), out_(out), b_(t.source, ctx.rank) {}

  Status run(const KinetoTraceOptions& options) {
    PRISM_RETURN_IF_ERROR(index_events());
    if (by_stream_.size() > kMaxStreams) {
      return Status::invalid_argument(fmt::format("{}: {} CUDA streams; at most {} are supported",
                                                  t_.source, by_stream_.size(), kMaxStreams));
    }
    for (const auto& [id, events] : by_stream_) {
      stream_index_[id] = b_.add_stream(fmt::format("stream{}", id));
    }
    for (const auto& [id, events] : by_stream_) PRISM_RETURN_IF_ERROR(add_stream_ops(id, events));
    add_stream_waits();
    const int main = main_stream();
    add_markers(profiler_steps(t_), main, &b_);
    if (options.memory) PRISM_RETURN_IF_ERROR(add_memory(t_, device_, main, &b_, &out_->summary));
    out_->summary.gpu = true;
    out_->program = std::move(b_).finish(&out_->summary);
    return Status::ok();
  }

 private:
  Status index_events() {
    for (const TraceEvent& e : t_.events) {
      if (is_gpu(e)) {
        if (device_ < 0) device_ = e.device;
        if (e.device != device_) {
          return Status::invalid_argument(fmt::format(
              "{}: runs on device {}, but earlier GPU activity on device {}; a trace must hold "
              "one rank's device",
              where(t_.source, e), e.device, device_));
        }
        by_stream_[e.stream].push_back(&e);
      } else if (e.cls == EventClass::kRuntime && e.correlation >= 0) {
        const auto [it, added] = launch_ns_.try_emplace(e.correlation, e.ts_ns);
        if (!added) it->second = std::min(it->second, e.ts_ns);
      } else if (e.cls == EventClass::kHostOp && e.name == "record_param_comms" &&
                 e.external_id >= 0) {
        comm_calls_.try_emplace(e.external_id, &e);
      }
    }
    return Status::ok();
  }

  std::int64_t launch_ns(std::int64_t corr, std::int64_t fallback) const {
    const auto it = corr >= 0 ? launch_ns_.find(corr) : launch_ns_.end();
    return it == launch_ns_.end() ? fallback : it->second;
  }

  // A stream's ops in execution order, issue times made non-decreasing.
  Status add_stream_ops(std::int64_t id, std::vector<const TraceEvent*> events) {
    std::stable_sort(events.begin(), events.end(),
                     [](const TraceEvent* a, const TraceEvent* b) { return a->ts_ns < b->ts_ns; });
    std::int64_t key = std::numeric_limits<std::int64_t>::min();
    std::int64_t corr = -1;
    std::int64_t seq = 0;
    for (const TraceEvent* e : events) {
      Pending p;
      key = std::max(key, launch_ns(e->correlation, e->ts_ns));
      corr = std::max(corr, e->correlation);
      p.key_ns = key;
      p.corr = corr;
      p.seq = seq++;
      p.event = e->index;
      p.name = std::string(e->name);
      p.op.stream = static_cast<std::uint16_t>(stream_index_.at(id));
      const bool comm =
          e->cls == EventClass::kKernel && (is_nccl_kernel(e->name) || has_comm_metadata(e->args));
      if (comm) {
        PRISM_RETURN_IF_ERROR(set_comm(*e, &p.op));
      } else {
        p.op.kind = OpKind::kCompute;
        p.op.duration = SimTime{e->dur_ns};
        ++compute_on_[id];
      }
      b_.add(std::move(p));
    }
    return Status::ok();
  }

  Status set_comm(const TraceEvent& e, Op* op) {
    const std::string at = where(t_.source, e);
    const auto host = comm_calls_.find(e.external_id);
    const Json* host_args = host == comm_calls_.end() ? nullptr : host->second->args;
    const Json* args = has_comm_metadata(e.args) ? e.args : host_args;
    if (!has_comm_metadata(args)) {
      return Status::invalid_argument(fmt::format(
          "{}: an NCCL kernel without collective metadata (no \"Collective name\" in its args "
          "nor in a record_param_comms op with its \"External id\"; PyTorch 2.x records them)",
          at));
    }
    PRISM_ASSIGN_OR_RETURN(const CommCall call, read_comm_call(args, host_args, e.name, ctx_, at));
    return b_.set_comm(call, at, op);
  }

  // cudaStreamWaitEvent: the waiting stream goes on only after the work that
  // the event's record captured on the other stream.
  void add_stream_waits() {
    for (const TraceEvent& e : t_.events) {
      if (e.cls != EventClass::kStreamWait || e.device != device_) continue;
      const std::int64_t on = arg_int(find_arg(e.args, "wait_on_stream")).value_or(-1);
      const std::int64_t record_corr =
          arg_int(find_arg(e.args, "wait_on_cuda_event_record_corr_id")).value_or(-1);
      const auto waiting = stream_index_.find(e.stream);
      const auto recorded = stream_index_.find(on);
      if (waiting == stream_index_.end() || recorded == stream_index_.end() || on == e.stream)
        continue;  // a stream without GPU ops here: nothing to order
      const auto record_at = record_corr >= 0 ? launch_ns_.find(record_corr) : launch_ns_.end();
      const std::int64_t wait_at = launch_ns(e.correlation, e.ts_ns);
      if (record_at == launch_ns_.end() || record_at->second > wait_at) {
        ++out_->summary.waits_without_record;
        continue;
      }
      const auto [it, first_wait] = event_of_record_.try_emplace(record_corr, -1);
      if (first_wait) {  // one record serves every wait on it
        it->second = b_.add_event();
        Pending r;
        r.key_ns = record_at->second;
        r.corr = record_corr;
        r.event = e.index;
        r.op.kind = OpKind::kEventRecord;
        r.op.stream = static_cast<std::uint16_t>(recorded->second);
        r.op.ref = it->second;
        b_.add(r);
      }
      Pending w;
      w.key_ns = wait_at;
      w.corr = e.correlation;
      w.event = e.index;
      w.op.kind = OpKind::kEventWait;
      w.op.stream = static_cast<std::uint16_t>(waiting->second);
      w.op.ref = it->second;
      b_.add(w);
    }
  }

  // The stream with the most compute ops (the lowest id on a tie): it holds
  // iteration markers and memory ops.
  int main_stream() const {
    std::int64_t best = -1;
    int most = -1;
    for (const auto& [id, n] : compute_on_) {
      if (n > most) {
        most = n;
        best = id;
      }
    }
    return best < 0 ? 0 : stream_index_.at(best);
  }

  const ParsedTrace& t_;
  const CommContext& ctx_;
  KinetoTrace* out_;
  ProgramBuilder b_;
  std::int64_t device_ = -1;
  std::map<std::int64_t, std::vector<const TraceEvent*>> by_stream_;  // ascending ids
  std::map<std::int64_t, int> stream_index_;
  std::map<std::int64_t, int> compute_on_;
  std::unordered_map<std::int64_t, std::int64_t> launch_ns_;        // correlation -> launch time
  std::unordered_map<std::int64_t, const TraceEvent*> comm_calls_;  // External id -> op
  std::map<std::int64_t, int> event_of_record_;  // record correlation -> add_event() id
};

}  // namespace

bool has_device_activity(const ParsedTrace& t) {
  return std::any_of(t.events.begin(), t.events.end(), is_gpu);
}

Status device_program(const ParsedTrace& t, const CommContext& ctx,
                      const KinetoTraceOptions& options, KinetoTrace* out) {
  DeviceConverter c(t, ctx, out);
  return c.run(options);
}

}  // namespace prism::kineto
