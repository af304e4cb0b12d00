#include "cli/search_command.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "planning/search.h"
#include "planning/search_report.h"
#include "util/file.h"

namespace prism {
namespace {

// "search: 120/640 configurations, 9.8/s, ETA 53 s", rewritten in place on a
// terminal; nothing when stderr is not one (util/progress.h's rule).
class ProgressLine {
 public:
  ProgressLine() : tty_(::isatty(STDERR_FILENO) != 0), start_(Clock::now()) {}
  void update(std::int64_t done, std::int64_t total) {
    if (!tty_) return;
    const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
    const double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0;
    const double eta = rate > 0 ? static_cast<double>(total - done) / rate : 0;
    fmt::print(stderr, "\rsearch: {}/{} configurations, {:.1f}/s, ETA {:.0f} s   ", done, total,
               rate, eta);
    if (done == total) fmt::print(stderr, "\n");
    std::fflush(stderr);
  }

 private:
  using Clock = std::chrono::steady_clock;
  bool tty_;
  Clock::time_point start_;
};

}  // namespace

SearchCommand::SearchCommand(CLI::App& parent)
    : app_(parent.add_subcommand("search",
                                 "Simulate every valid parallel configuration of a job spec and "
                                 "rank them by tokens/s per GPU")) {
  app_->footer(
      "LIST: values and ranges, e.g. 1,2,4,8 or 1-16 or 1,4-8 (a range is every integer in it; "
      "Megatron's rules filter them). Exit status: 0 searched (even if nothing fits), 1 error.");
  job_.add_to(app_);
  auto list = [this](const char* name, std::optional<std::string>* out, const char* help) {
    app_->add_option_function<std::string>(
            name, [out](const std::string& v) { *out = v; }, help)
        ->type_name("LIST");
  };
  list("--tp", &axes_.tp,
       "tensor_model_parallel_size values (default: powers of two up to a node's GPUs)");
  list("--pp", &axes_.pp, "pipeline_model_parallel_size values (default: 1 to the layers)");
  list("--vpp", &axes_.vpp, "virtual_pipeline_model_parallel_size values (default: 1-8)");
  list("--cp", &axes_.cp, "context_parallel_size values (default: 1,2,4,8)");
  list("--ep", &axes_.ep,
       "expert_model_parallel_size values (default: an MoE model's powers of two dividing its "
       "experts; 1)");
  list("--mbs", &axes_.mbs, "micro_batch_size values (default: 1,2,4)");
  list("--recompute", &axes_.recompute, "none, selective, full (default: all three)");
  list("--distributed-optimizer", &axes_.distributed_optimizer,
       "use_distributed_optimizer: on, off (default: the job's)");
  list("--overlap-grad-reduce", &axes_.overlap_grad_reduce,
       "overlap_grad_reduce: on, off (default: the job's)");
  list("--overlap-param-gather", &axes_.overlap_param_gather,
       "overlap_param_gather: on, off (default: the job's where the distributed optimizer is on, "
       "off elsewhere)");
  list("--sequence-parallel", &axes_.sequence_parallel,
       "sequence_parallel with tp > 1: on, off (default: on)");
  app_->add_option("--top", top_, "Print the best N configurations (default: 10)")->type_name("N");
  app_->add_option("-j,--jobs", jobs_, "Simulate N configurations at a time (default: the cores)")
      ->type_name("N");
  app_->add_option("--csv", csv_path_, "Write every simulated configuration to FILE (CSV)")
      ->type_name("FILE");
  app_->add_option("--report", report_path_,
                   "Write the JSON report to FILE: every simulated configuration (out-of-memory "
                   "ones with the memory they need) and every rejected one with its reason")
      ->type_name("FILE");
  app_->add_option("--html", html_path_,
                   "Write the HTML report to FILE: one self-contained page with every simulated "
                   "configuration on a tokens/s per GPU against peak memory chart, and the "
                   "Pareto front")
      ->type_name("FILE");
  nccl_.add_to(app_);
  memory_.add_to(app_);
}

bool SearchCommand::selected() const {
  return app_->parsed();
}

Result<int> SearchCommand::run() const {
  if (top_ < 1) return Status::invalid_argument(fmt::format("--top: {} is not at least 1", top_));
  if (jobs_ < 0) return Status::invalid_argument(fmt::format("-j/--jobs: {} is negative", jobs_));
  SearchOptions options;
  PRISM_ASSIGN_OR_RETURN(options.nccl, nccl_.selection());
  PRISM_RETURN_IF_ERROR(
      check_output_files(*app_, {"--csv", "--report", "--html"}, job_.job_path, "job spec"));
  PRISM_ASSIGN_OR_RETURN(const PreparedJob base, read_job(job_));
  PRISM_ASSIGN_OR_RETURN(options.device, memory_.device(base.gpu.name));
  options.jobs =
      jobs_ > 0 ? jobs_ : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ProgressLine line;
  options.on_progress = [&line](std::int64_t done, std::int64_t total) {
    line.update(done, total);
  };
  PRISM_ASSIGN_OR_RETURN(const SearchOutput out, search_job(base, axes_, options));
  const std::string text = format_search_text(base, out, top_);
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
  std::vector<std::pair<std::string, std::string>> outputs;  // all or none
  if (!csv_path_.empty()) outputs.emplace_back(csv_path_, format_search_csv(out));
  if (!report_path_.empty()) outputs.emplace_back(report_path_, format_search_json(base, out));
  if (!html_path_.empty()) outputs.emplace_back(html_path_, format_search_html(base, out, top_));
  PRISM_RETURN_IF_ERROR(write_files_atomic(outputs));
  return 0;
}

}  // namespace prism
