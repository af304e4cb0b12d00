#include "cli/memory_command.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/job_setup.h"
#include "mem/alloc_config.h"
#include "mem/snapshot.h"
#include "mem/snapshot_replay.h"
#include "util/file.h"

namespace prism {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

struct ChosenConfig {
  AllocatorConfig config;
  std::string source;  // "recorded", "option", "default"
};

Result<ChosenConfig> choose_config(const CLI::App& app, const std::string& alloc_conf,
                                   const MemoryTrace& trace) {
  if (app.get_option("--alloc-conf")->count() > 0) {
    Result<AllocatorConfig> c = parse_alloc_conf(alloc_conf);
    if (!c.is_ok()) return c.status().with_context("--alloc-conf");
    return ChosenConfig{c.value(), "option"};
  }
  if (trace.has_settings) return ChosenConfig{trace.settings, "recorded"};
  return ChosenConfig{AllocatorConfig{}, "default"};
}

Result<std::int64_t> capacity_bytes(const CLI::App& app, double gib) {
  if (app.get_option("--capacity-gib")->count() == 0) return std::int64_t{0};
  if (!std::isfinite(gib) || gib <= 0 || gib > 1e9)
    return Status::invalid_argument(
        fmt::format("--capacity-gib must be > 0 and at most 1e9 (got {})", gib));
  return static_cast<std::int64_t>(std::llround(gib * kGiB));
}

std::string settings_line(const ChosenConfig& c) {
  const std::string text = c.config.to_string();
  const std::string shown = text.empty() ? "default settings" : text;
  if (c.source == "option") return shown + " (--alloc-conf)";
  if (c.source == "recorded") return shown + " (recorded)";
  return shown + " (none recorded)";
}

std::string row(std::string_view label, const std::string& recorded, const std::string& modelled) {
  return fmt::format("{:<22}{:>16}{:>16}\n", label, recorded, modelled);
}

std::string gib(std::int64_t bytes) {
  return fmt::format("{:.3f}", static_cast<double>(bytes) / kGiB);
}

std::string plural(std::size_t n, std::string_view word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

bool overall_match(const SnapshotReplayResult& r, bool strict) {
  return r.events_match() && r.peaks_match() && (!strict || r.segments_match());
}

std::string segments_line(const MemoryTrace& trace, const SnapshotReplayResult& r, bool strict) {
  if (!trace.has_final_segments) return "not recorded";
  if (!r.segments_checked) return "not compared (the events diverged)";
  if (r.segments_match()) return fmt::format("match ({})", plural(r.modelled_segments, "segment"));
  return fmt::format("differ{}: {}", strict ? "" : " (fails only with --strict)",
                     r.segments_difference);
}

std::string format_summary(const std::string& path, const MemoryTrace& trace,
                           const ChosenConfig& config, const SnapshotReplayResult& r, bool strict) {
  const RecordedPeaks& p = r.recorded;
  const AllocatorStats& m = r.modelled;
  const auto num = [](std::int64_t v) { return std::to_string(v); };
  std::string out;
  out += fmt::format("trace:           {} (device {}, {})\n", path, trace.device,
                     plural(r.events, "allocator event"));
  out += fmt::format("allocator:       {}\n\n", settings_line(config));
  out += row("", "recorded", "modelled");
  out += row("peak allocated (bytes)", num(p.allocated_peak), num(m.allocated_peak));
  out += row("peak allocated (GiB)", gib(p.allocated_peak), gib(m.allocated_peak));
  out += row("peak reserved (bytes)", num(p.reserved_peak), num(m.reserved_peak));
  out += row("peak reserved (GiB)", gib(p.reserved_peak), gib(m.reserved_peak));
  out += row("segment allocs", num(p.segment_allocs), num(m.num_device_alloc));
  out += row("allocs", num(p.allocs), num(m.num_allocs));
  out += row("alloc retries", "-", num(m.num_alloc_retries));
  out += row("OOMs", num(p.ooms), num(m.num_ooms));
  if (p.misfit_entry)
    out += fmt::format(
        "\nnote: trace entry {} does not fit these allocator settings; the recorded allocated "
        "bytes are approximate from there\n",
        *p.misfit_entry);
  out += fmt::format("\nevents:          {} of {} match\n", r.matched, r.events);
  if (r.divergence)
    out += fmt::format("first divergence: {}\n", describe_divergence(*r.divergence));
  out += fmt::format("final segments:  {}\n", segments_line(trace, r, strict));
  out += fmt::format("match:           {}\n", overall_match(r, strict) ? "yes" : "no");
  return out;
}

using Json = nlohmann::ordered_json;

Json event_json(const std::optional<AllocatorEvent>& e) {
  if (!e) return nullptr;
  Json j;
  j["action"] = std::string(action_name(e->action));
  j[e->action == AllocatorEvent::Action::kOom ? "device_free" : "addr"] = e->addr;
  j["size"] = e->size;
  j["stream"] = e->stream;
  return j;
}

std::string format_report(const std::string& path, const MemoryTrace& trace,
                          const ChosenConfig& config, std::int64_t capacity,
                          const SnapshotReplayResult& r, bool strict) {
  const RecordedPeaks& p = r.recorded;
  const AllocatorStats& m = r.modelled;
  Json j;
  j["format_version"] = 1;
  j["trace"] = path;
  j["device"] = trace.device;
  j["alloc_conf"] = config.config.to_string();
  j["alloc_conf_source"] = config.source;
  j["capacity_bytes"] = capacity;
  j["strict"] = strict;
  j["match"] = overall_match(r, strict);
  j["events"] = r.events;
  j["events_matched"] = r.matched;
  j["events_match"] = r.events_match();
  j["peaks_match"] = r.peaks_match();
  j["recorded"] = {{"peak_allocated_bytes", p.allocated_peak},
                   {"peak_reserved_bytes", p.reserved_peak},
                   {"peak_requested_bytes", p.requested_peak},
                   {"final_allocated_bytes", p.allocated_final},
                   {"final_reserved_bytes", p.reserved_final},
                   {"allocs", p.allocs},
                   {"frees", p.frees},
                   {"segment_allocs", p.segment_allocs},
                   {"segment_frees", p.segment_frees},
                   {"ooms", p.ooms},
                   {"misfit_entry", p.misfit_entry ? Json(*p.misfit_entry) : Json(nullptr)}};
  j["modelled"] = {{"peak_allocated_bytes", m.allocated_peak},
                   {"peak_reserved_bytes", m.reserved_peak},
                   {"peak_requested_bytes", m.requested_peak},
                   {"final_allocated_bytes", m.allocated},
                   {"final_reserved_bytes", m.reserved},
                   {"allocs", m.num_allocs},
                   {"frees", m.num_frees},
                   {"segment_allocs", m.num_device_alloc},
                   {"segment_frees", m.num_device_free},
                   {"ooms", m.num_ooms},
                   {"alloc_retries", m.num_alloc_retries}};
  Json d = nullptr;
  if (r.divergence) {
    d = Json::object();
    d["entry"] = r.divergence->entry;
    d["expected"] = event_json(r.divergence->expected);
    d["got"] = event_json(r.divergence->got);
    d["text"] = describe_divergence(*r.divergence);
  }
  j["first_divergence"] = d;
  Json segs;
  segs["recorded"] = trace.has_final_segments ? Json(trace.final_segments.size()) : Json(nullptr);
  segs["modelled"] = r.modelled_segments;
  segs["checked"] = r.segments_checked;
  segs["match"] = r.segments_checked ? Json(r.segments_match()) : Json(nullptr);
  segs["difference"] = r.segments_difference.empty() ? Json(nullptr) : Json(r.segments_difference);
  j["final_segments"] = segs;
  return j.dump(2) + "\n";
}

}  // namespace

MemoryCommand::MemoryCommand(CLI::App& parent)
    : memory_(parent.add_subcommand(
          "memory", "Check the allocator model against recorded PyTorch memory histories")) {
  memory_->require_subcommand(1);
  replay_ = memory_->add_subcommand(
      "replay", "Replay a PyTorch CUDA memory history through the caching-allocator model");
  replay_->footer(
      "SNAPSHOT is the JSON that scripts/memory_snapshot_to_json.py makes of the pickle "
      "torch.cuda.memory._dump_snapshot() writes.\nExit status: 0 every event and both peaks "
      "match, 1 error, 5 the model diverged from the recording (summary and report still "
      "written).");
  replay_->add_option("SNAPSHOT", snapshot_path_, "Converted memory snapshot (JSON)")
      ->required()
      ->type_name("FILE");
  replay_
      ->add_option("--alloc-conf", alloc_conf_,
                   "PYTORCH_CUDA_ALLOC_CONF to replay with, instead of the recorded settings")
      ->type_name("CONF");
  replay_
      ->add_option("--capacity-gib", capacity_gib_,
                   "Device memory for the model, GiB (default: only the recording's failures)")
      ->type_name("X");
  replay_->add_option("--report", report_path_, "Write the JSON report to FILE")->type_name("FILE");
  replay_->add_flag("--strict", strict_,
                    "Also require the final segments to match the snapshot's segments");
}

bool MemoryCommand::selected() const {
  return replay_->parsed();
}

Result<int> MemoryCommand::run() const {
  PRISM_ASSIGN_OR_RETURN(const std::int64_t capacity, capacity_bytes(*replay_, capacity_gib_));
  PRISM_RETURN_IF_ERROR(check_output_files(*replay_, {"--report"}, snapshot_path_, "snapshot"));
  progress(fmt::format("loading {}...", snapshot_path_));
  PRISM_ASSIGN_OR_RETURN(const MemoryTrace trace, load_memory_trace(snapshot_path_));
  PRISM_ASSIGN_OR_RETURN(const ChosenConfig config, choose_config(*replay_, alloc_conf_, trace));

  SnapshotReplayOptions options;
  options.config = config.config;
  options.capacity = capacity;
  options.device_memory = capacity > 0 ? capacity : trace.device_total_memory;
  progress(fmt::format("replaying {} events...", trace.events.size()));
  Result<SnapshotReplayResult> replayed = replay_memory_trace(trace, options);
  if (!replayed.is_ok()) return replayed.status().with_context(snapshot_path_);
  const SnapshotReplayResult& r = replayed.value();

  std::fputs(format_summary(snapshot_path_, trace, config, r, strict_).c_str(), stdout);
  std::fflush(stdout);
  if (!report_path_.empty())
    PRISM_RETURN_IF_ERROR(write_file_atomic(
        report_path_, format_report(snapshot_path_, trace, config, capacity, r, strict_)));
  return overall_match(r, strict_) ? 0 : kExitDiverged;
}

}  // namespace prism
