#include "kineto/kernel_calibration.h"

#include <algorithm>
#include <cctype>
#include <ctime>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "compute/gpu_spec.h"
#include "compute/kernel.h"
#include "compute/kernel_db.h"
#include "kineto/comm_args.h"
#include "kineto/op_kernel.h"
#include "kineto/trace_events.h"
#include "util/file.h"

namespace prism {
namespace {

using kineto::EventClass;
using kineto::Json;
using kineto::ParsedTrace;
using kineto::TraceEvent;

constexpr std::string_view kShapesHint =
    "profile with torch.profiler.profile(..., record_shapes=True)";

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// The database's name of a CUDA device (torch's name and memory), as
// scripts/measure_kernels.py's db_gpu_name; none for a device without a preset.
std::optional<std::string> preset_of_device(std::string_view name, double total_bytes) {
  const std::string n = upper(name);
  if (n.find("B200") != std::string::npos) return "B200-SXM-180GB";
  if (n.find("H200") != std::string::npos) return "H200-SXM-141GB";
  const bool pcie = n.find("PCIE") != std::string::npos;
  if (n.find("H100") != std::string::npos) {
    if (pcie || n.find("NVL") != std::string::npos) return std::nullopt;
    return "H100-SXM5-80GB";
  }
  if (n.find("A100") != std::string::npos && !pcie)
    return total_bytes > 50e9 ? "A100-SXM4-80GB" : "A100-SXM4-40GB";
  return std::nullopt;
}

// The device a trace's kernels ran on, as its deviceProperties describe it.
struct TraceDevice {
  std::string name;                   // empty: the trace has no properties for it
  std::optional<std::string> preset;  // the database's name, if it has one
};

TraceDevice trace_device(const ParsedTrace& t, std::int64_t device) {
  TraceDevice d;
  const Json* props = kineto::find_arg(t.doc.get(), "deviceProperties");
  if (props == nullptr || !props->is_array()) return d;
  for (const Json& p : *props) {
    if (!p.is_object()) continue;
    const std::optional<std::int64_t> id = kineto::arg_int(kineto::find_arg(&p, "id"));
    const std::optional<std::string> name = kineto::arg_string(kineto::find_arg(&p, "name"));
    if (!name || (id && *id != device)) continue;
    const Json* mem = kineto::find_arg(&p, "totalGlobalMem");
    d.name = *name;
    d.preset = preset_of_device(*name, mem != nullptr && mem->is_number() ? mem->get<double>() : 0);
    return d;
  }
  return d;
}

bool is_device_activity(const TraceEvent& e) {
  return e.cls == EventClass::kKernel || e.cls == EventClass::kGpuCopy;
}

bool is_host(const TraceEvent& e) {
  return e.cls == EventClass::kHostOp || e.cls == EventClass::kAnnotation;
}

std::string today_utc() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  return fmt::format("{:04}-{:02}-{:02}", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
}

bool is_date(std::string_view s) {
  if (s.size() != 10 || s[4] != '-' || s[7] != '-') return false;
  for (std::size_t i : {0, 1, 2, 3, 5, 6, 8, 9})
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  return true;
}

// A file name fit for the CSV's source column: no commas, no control bytes.
std::string source_name(const std::string& path) {
  std::string name = std::filesystem::path(path).filename().string();
  for (char& c : name)
    if (c == ',' || static_cast<unsigned char>(c) < 0x20) c = '_';
  return name;
}

// The host side of a trace: ops by External id, launches by correlation,
// each op's parent on its thread (host ops nest by time).
struct HostIndex {
  std::unordered_map<std::int64_t, const TraceEvent*> by_external;
  std::unordered_map<std::int64_t, std::int64_t> launch_external;  // correlation -> External id
  std::unordered_map<const TraceEvent*, const TraceEvent*> parent;

  // The op that launched a device activity: its External id's, else its
  // launch's (the runtime call with its correlation); null if neither is here.
  const TraceEvent* launcher(const TraceEvent& activity) const {
    std::int64_t ext = activity.external_id;
    if (ext < 0 && activity.correlation >= 0) {
      const auto it = launch_external.find(activity.correlation);
      if (it != launch_external.end()) ext = it->second;
    }
    const auto op = ext < 0 ? by_external.end() : by_external.find(ext);
    return op == by_external.end() ? nullptr : op->second;
  }

  // The outermost op with a kernel signature around `op` (itself included).
  const TraceEvent* owner(const TraceEvent* op) const {
    const TraceEvent* found = nullptr;
    while (op != nullptr) {
      if (op->cls == EventClass::kHostOp && kineto::is_kernel_op(op->name)) found = op;
      const auto p = parent.find(op);
      op = p == parent.end() ? nullptr : p->second;
    }
    return found;
  }
};

HostIndex index_host(const ParsedTrace& t) {
  HostIndex h;
  std::map<std::string_view, std::vector<const TraceEvent*>> by_thread;
  for (const TraceEvent& e : t.events) {
    if (is_host(e)) {
      if (e.external_id >= 0) h.by_external.try_emplace(e.external_id, &e);
      by_thread[e.thread].push_back(&e);
    } else if (e.cls == EventClass::kRuntime && e.correlation >= 0 && e.external_id >= 0) {
      h.launch_external.try_emplace(e.correlation, e.external_id);
    }
  }
  for (auto& [thread, ops] : by_thread) {
    std::stable_sort(ops.begin(), ops.end(), [](const TraceEvent* a, const TraceEvent* b) {
      return a->ts_ns != b->ts_ns ? a->ts_ns < b->ts_ns : a->end_ns() > b->end_ns();
    });
    std::vector<const TraceEvent*> stack;
    for (const TraceEvent* e : ops) {
      while (!stack.empty() && e->end_ns() > stack.back()->end_ns()) stack.pop_back();
      if (!stack.empty()) h.parent[e] = stack.back();
      stack.push_back(e);
    }
  }
  return h;
}

class Calibrator {
 public:
  Status add(const ParsedTrace& t);
  Status finish(const KernelCalibrationOptions& options, KernelCalibration* out);

 private:
  Status check_trace(const ParsedTrace& t, std::int64_t* device) const;
  void unmapped(const std::string& key, const TraceEvent* op, std::int64_t ns);

  KernelCalibration c_;
  std::map<std::string, std::vector<std::int64_t>> times_;  // signature -> ns per op
  std::unordered_set<const TraceEvent*> counted_;           // unmapped ops, of the current trace
  std::optional<std::string> first_device_;                 // "name" of the first trace
  std::string first_source_;
  TraceDevice device_;
};

Status Calibrator::check_trace(const ParsedTrace& t, std::int64_t* device) const {
  int kernels = 0, host = 0, shaped = 0;
  for (const TraceEvent& e : t.events) {
    if (e.cls == EventClass::kKernel && !kineto::is_nccl_kernel(e.name)) {
      if (kernels++ == 0) *device = e.device;
    }
    if (e.cls == EventClass::kHostOp) {
      ++host;
      if (kineto::has_input_dims(e)) ++shaped;
    }
  }
  if (kernels == 0) {
    return Status::invalid_argument(
        fmt::format("{}: no GPU kernels (other than NCCL's): profile the step on the GPU with "
                    "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]",
                    t.source));
  }
  if (host == 0) {
    return Status::invalid_argument(
        fmt::format("{}: no host operators, so no kernel can be tied to an op: profile with "
                    "ProfilerActivity.CPU too",
                    t.source));
  }
  const Json* flag = kineto::find_arg(t.doc.get(), "record_shapes");
  const bool off = flag != nullptr && ((flag->is_boolean() && !flag->get<bool>()) ||
                                       (flag->is_number() && flag->get<double>() == 0));
  if (off || shaped == 0)
    return Status::invalid_argument(
        fmt::format("{}: no input shapes recorded: {}", t.source, kShapesHint));
  return Status::ok();
}

void Calibrator::unmapped(const std::string& key, const TraceEvent* op, std::int64_t ns) {
  UnmappedOps& u = c_.unmapped[key];
  if (op == nullptr || counted_.insert(op).second) ++u.ops;
  ++u.kernels;
  u.device_ns += ns;
}

Status Calibrator::add(const ParsedTrace& t) {
  std::int64_t device = 0;
  PRISM_RETURN_IF_ERROR(check_trace(t, &device));
  TraceDevice dev = trace_device(t, device);
  if (!first_device_) {
    first_device_ = dev.name;
    first_source_ = t.source;
    device_ = dev;
  } else if (dev.name != *first_device_) {
    return Status::invalid_argument(
        fmt::format("{}: ran on '{}', but {} on '{}'; one calibration is for one GPU", t.source,
                    dev.name.empty() ? "(no deviceProperties)" : dev.name, first_source_,
                    first_device_->empty() ? "(no deviceProperties)" : *first_device_));
  }
  ++c_.traces;
  counted_.clear();

  const HostIndex host = index_host(t);
  std::map<const TraceEvent*, std::pair<int, std::int64_t>> owned;  // op -> activities, ns
  for (const TraceEvent& e : t.events) {
    if (!is_device_activity(e)) continue;
    if (e.cls == EventClass::kKernel && kineto::is_nccl_kernel(e.name)) {
      ++c_.nccl_kernels;
      continue;
    }
    ++c_.device_activities;
    c_.device_ns += e.dur_ns;
    const TraceEvent* launcher = host.launcher(e);
    if (launcher == nullptr) {
      unmapped("(no host op): its launch is not tied to a host op in the trace", nullptr, e.dur_ns);
      continue;
    }
    const TraceEvent* owner = host.owner(launcher);
    if (owner == nullptr) {
      unmapped(fmt::format("{}: no GEMM, attention, norm or softmax op around its kernels",
                           launcher->name),
               launcher, e.dur_ns);
      continue;
    }
    auto& [n, ns] = owned[owner];
    ++n;
    ns += e.dur_ns;
  }
  for (const auto& [op, use] : owned) {
    const kineto::OpKernel k = kineto::kernel_of_op(*op);
    if (!k.kernel) {
      UnmappedOps& u = c_.unmapped[fmt::format("{}: {}", op->name, k.why_not)];
      ++u.ops;
      u.kernels += use.first;
      u.device_ns += use.second;
      continue;
    }
    times_[signature(*k.kernel)].push_back(use.second);
    ++c_.ops_matched;
    c_.activities_matched += use.first;
    c_.matched_ns += use.second;
  }
  return Status::ok();
}

Status Calibrator::finish(const KernelCalibrationOptions& options, KernelCalibration* out) {
  if (!options.gpu.empty()) PRISM_RETURN_IF_ERROR(gpu_spec(options.gpu).status());
  const std::string& traced = device_.name;
  if (device_.preset) {
    if (!options.gpu.empty() && options.gpu != *device_.preset) {
      return Status::invalid_argument(fmt::format("{}: the trace ran on '{}' ({}), not --gpu {}",
                                                  first_source_, traced, *device_.preset,
                                                  options.gpu));
    }
    c_.gpu = *device_.preset;
    c_.gpu_origin = fmt::format("the trace's device '{}'", traced);
  } else if (!options.gpu.empty()) {
    c_.gpu = options.gpu;
    c_.gpu_origin = traced.empty() ? "--gpu (the trace has no deviceProperties)"
                                   : fmt::format("--gpu (the trace's device '{}')", traced);
  } else if (traced.empty()) {
    return Status::invalid_argument(fmt::format(
        "{}: no deviceProperties for the kernels' device: name the GPU with --gpu", first_source_));
  } else {
    return Status::invalid_argument(
        fmt::format("{}: device '{}' has no GPU preset: name the database GPU with --gpu",
                    first_source_, traced));
  }
  if (times_.empty()) {
    return Status::invalid_argument(
        fmt::format("{}: no kernel ran under an op with a signature (GEMMs, attention, norms, "
                    "softmax; docs/kineto.md): "
                    "nothing to write",
                    first_source_));
  }
  for (auto& [sig, ns] : times_) {
    std::sort(ns.begin(), ns.end());
    const std::size_t n = ns.size();
    const std::int64_t median = n % 2 == 1 ? ns[n / 2] : (ns[n / 2 - 1] + ns[n / 2] + 1) / 2;
    c_.kernels.push_back(CalibratedKernel{sig, median, static_cast<int>(n)});
  }
  *out = std::move(c_);
  return Status::ok();
}

// `with_trace(i, use)` calls `use` with the i-th of `n` traces, parsed (one
// in memory at a time when it reads them).
template <typename WithTrace>
Result<KernelCalibration> calibrate(std::size_t n, WithTrace with_trace,
                                    const KernelCalibrationOptions& options) {
  if (n == 0) return Status::invalid_argument("no trace given");
  const std::string date = options.date.empty() ? today_utc() : options.date;
  if (!is_date(date))
    return Status::invalid_argument(fmt::format("date '{}' is not YYYY-MM-DD", date));
  Calibrator cal;
  std::string sources;
  for (std::size_t i = 0; i < n; ++i) {
    PRISM_RETURN_IF_ERROR(with_trace(i, [&](const ParsedTrace& t) {
      PRISM_RETURN_IF_ERROR(cal.add(t));
      sources += (sources.empty() ? "" : "+") + source_name(t.source);
      return Status::ok();
    }));
  }
  KernelCalibration c;
  PRISM_RETURN_IF_ERROR(cal.finish(options, &c));
  c.source = fmt::format("{}{} {}", kInSituSourcePrefix, sources, date);
  return c;
}

// `use` with the trace `text`, named `name`, parsed.
template <typename Use>
Status with_parsed(const std::string& text, const std::string& name, Use use) {
  PRISM_ASSIGN_OR_RETURN(const ParsedTrace t, kineto::parse_trace(text, name));
  return use(t);
}

}  // namespace

Result<KernelCalibration> calibrate_kernels(
    const std::vector<std::pair<std::string, std::string>>& traces,
    const KernelCalibrationOptions& options) {
  return calibrate(
      traces.size(),
      [&](std::size_t i, auto use) { return with_parsed(traces[i].second, traces[i].first, use); },
      options);
}

Result<KernelCalibration> calibrate_kernels_from_files(
    const std::vector<std::filesystem::path>& files, const KernelCalibrationOptions& options) {
  return calibrate(
      files.size(),
      [&](std::size_t i, auto use) -> Status {
        const std::string name = files[i].string();
        PRISM_ASSIGN_OR_RETURN(const std::string text, read_file(name));
        return with_parsed(text, name, use);
      },
      options);
}

Result<KernelCalibration> calibrate_parsed_kernels(
    const std::vector<const kineto::ParsedTrace*>& traces,
    const KernelCalibrationOptions& options) {
  return calibrate(
      traces.size(), [&](std::size_t i, auto use) { return use(*traces[i]); }, options);
}

std::string kernel_db_csv(const KernelCalibration& c) {
  std::string out = "gpu,signature,us,source,count\n";
  for (const CalibratedKernel& k : c.kernels) {
    out += fmt::format("{},{},{}.{:03},{},{}\n", c.gpu, k.signature, k.median_ns / 1000,
                       k.median_ns % 1000, c.source, k.count);
  }
  return out;
}

}  // namespace prism
