// Golden tests of the `prism` command line.
//
// Each case runs the built binary (PRISM_BINARY_DIR/bin/prism) with the source
// root as working directory, so paths in its output are repository-relative,
// and compares exit status, stdout and stderr with tests/cli/golden/<case>.txt.
// Cases that write files (--report, --trace) also compare each file with
// tests/cli/golden/<case>.<file>. "{tmp}" in arguments stands for a fresh
// temporary directory.
//
// To accept new output after an intended change, rewrite the goldens instead
// of comparing, then review the diff:
//
//   PRISM_UPDATE_GOLDEN=1 ctest --preset release -R cli_test
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "run_prism.h"
#include "util/file.h"

extern char** environ;

namespace prism {
namespace {

namespace fs = std::filesystem;

const fs::path kGoldenDir = fs::path(testing::kSourceDir) / "tests" / "cli" / "golden";
using testing::run_prism;
using testing::RunResult;
using testing::slurp;

struct Case {
  std::string name;                     // golden file stem; also the test name
  std::vector<std::string> args;        // after "prism"
  std::vector<std::string> files = {};  // files the command writes under {tmp}
  // (source path, name under {tmp}): copied there before the run, for cases
  // that must not touch the source tree even when they fail.
  std::vector<std::pair<std::string, std::string>> inputs = {};
  // Files the command writes under {tmp} that are not compared (too large
  // for a golden); anything else found there fails the case.
  std::vector<std::string> unchecked = {};
};

// Names the case in test listings instead of dumping its bytes.
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

std::string describe(const Case& c, const RunResult& run) {
  std::string cmd = "$ prism";
  for (const std::string& a : c.args) cmd += a.empty() ? " ''" : " " + a;
  return cmd + "\nexit status: " + std::to_string(run.exit_status) + "\n--- stdout\n" + run.out +
         "--- stderr\n" + run.err;
}

bool updating() {
  const char* v = std::getenv("PRISM_UPDATE_GOLDEN");
  return v != nullptr && std::string(v) == "1";
}

// Compares `actual` with the golden file `name`, or rewrites it when updating.
void check_golden(const std::string& name, const std::string& actual) {
  const fs::path golden = kGoldenDir / name;
  if (updating()) {
    ASSERT_TRUE(write_file_atomic(golden.string(), actual).is_ok()) << golden;
    return;
  }
  ASSERT_TRUE(fs::exists(golden)) << golden << " is missing; run with PRISM_UPDATE_GOLDEN=1";
  EXPECT_EQ(slurp(golden), actual)
      << "differs from " << golden << " (PRISM_UPDATE_GOLDEN=1 rewrites it)";
}

class CliGoldenTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "prism_cli_test.XXXXXX").string();
    ASSERT_NE(mkdtemp(templ.data()), nullptr);
    tmp_ = templ;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }
  std::string tmp_;
};

TEST_P(CliGoldenTest, MatchesGolden) {
  const Case& c = GetParam();
  for (const auto& [from, to] : c.inputs)
    ASSERT_TRUE(fs::copy_file(fs::path(testing::kSourceDir) / from, fs::path(tmp_) / to)) << from;
  const RunResult run = run_prism(c.args, tmp_);
  check_golden(c.name + ".txt", describe(c, run));
  for (const std::string& f : c.files) {
    const fs::path written = fs::path(tmp_) / f;
    ASSERT_TRUE(fs::exists(written)) << c.name << " did not write " << f;
    check_golden(c.name + "." + f, slurp(written));
  }
  // Nothing else: no output of a failed run, no temporary file.
  for (const auto& e : fs::directory_iterator(tmp_)) {
    const std::string name = e.path().filename().string();
    const bool input = std::any_of(c.inputs.begin(), c.inputs.end(),
                                   [&](const auto& in) { return in.second == name; });
    const bool output =
        std::find(c.files.begin(), c.files.end(), name) != c.files.end() ||
        std::find(c.unchecked.begin(), c.unchecked.end(), name) != c.unchecked.end();
    const bool captured = name == "stdout" || name == "stderr";  // run_prism's own
    EXPECT_TRUE(input || output || captured) << c.name << " left " << name << " in its folder";
  }
}

const std::string kGpt = "examples/graphs/gpt_tp2_pp2_dp2.json";
const std::string kDeadlock = "examples/graphs/deadlock.json";
const std::string kOversubscribed = "tests/cli/data/cluster_oversubscribed.yaml";
const std::string kJob = "tests/cli/data/job_small.yaml";
const std::string kMemData = "tests/mem/data/";

std::vector<Case> cases() {
  return {
      // Help and version (exit 0).
      {"help", {"--help"}},
      {"version", {"--version"}},
      {"replay_help", {"replay", "--help"}},
      {"validate_help", {"validate", "--help"}},
      // Replays.
      {"replay_gpt", {"replay", kGpt}},
      {"replay_gpt_no_fold", {"replay", kGpt, "--no-fold"}},
      {"replay_gpt_model_options",
       {"replay", kGpt, "--cluster", "dgx-a100", "--nccl-algo", "Ring", "--nccl-proto", "Simple",
        "--gpu-tflops", "500", "--hbm-bw", "2000"}},
      {"replay_gpt_oversubscribed", {"replay", kGpt, "--cluster", kOversubscribed}},
      // Collective tables.
      {"collective_help", {"collective", "--help"}},
      {"collective_h100_64",
       {"collective", "--cluster", "dgx-h100", "--num-gpus", "64", "--op", "all_reduce",
        "--min-bytes", "8", "--max-bytes", "8G", "-f", "8"}},
      {"collective_a100_report",
       {"collective", "--cluster", "dgx-a100", "--num-nodes", "4", "--op", "all_gather", "-b", "1M",
        "-e", "1G", "-f", "32", "--report", "{tmp}/sweep.json"},
       {"sweep.json"}},
      {"collective_forced_ring",
       {"collective", "--num-gpus", "8", "-b", "1K", "-e", "1G", "-f", "64", "--algo", "Ring",
        "--proto", "^LL"}},
      {"collective_send_recv",
       {"collective", "--cluster", "hgx-h200", "--num-nodes", "2", "--op", "sendrecv", "-b", "1K",
        "-e", "1G", "-f", "32"}},
      // nccl-tests' own command line: all_reduce_perf -b 8 -e 128M -f 2 -g 8 -d bfloat16 -o avg.
      {"collective_nccl_tests_flags",
       {"collective", "-b",       "8",  "-e",  "128M", "-f", "16", "-g", "8",  "-t", "2",
        "-d",         "bfloat16", "-o", "avg", "-n",   "50", "-w", "10", "-c", "0"}},
      {"collective_broadcast_root",
       {"collective", "--op", "broadcast", "-r", "3", "-b", "1M", "-e", "16M", "-f", "4"}},
      {"collective_yaml_cluster",
       {"collective", "--cluster", kOversubscribed, "--num-nodes", "2", "--op", "alltoall", "-b",
        "1M", "-e", "64M", "-f", "8", "-d", "bf16"}},
      {"replay_gpt_files",
       {"replay", kGpt, "--report", "{tmp}/report.json", "--trace", "{tmp}/trace.json",
        "--trace-ranks", "0,4-5", "--trace-level", "ops"},
       {"report.json", "trace.json"}},
      {"replay_gpt_trace_default_rank",
       {"replay", kGpt, "--trace", "{tmp}/trace.json"},
       {"trace.json"}},
      {"replay_gpt_trace_iterations",
       {"replay", kGpt, "--trace", "{tmp}/trace.json", "--trace-ranks", "0,4", "--trace-level",
        "iterations"},
       {"trace.json"}},
      {"replay_deadlock", {"replay", kDeadlock, "--report", "{tmp}/report.json"}, {"report.json"}},
      {"validate_gpt", {"validate", kGpt}},
      {"validate_deadlock", {"validate", kDeadlock}},
      // Rejections: each prints one "error: ..." line and exits 1.
      {"error_no_command", {}},
      {"error_unknown_command", {"simulate-everything"}},
      {"error_unknown_top_level_option", {"--fold-harder"}},
      {"error_unknown_option", {"replay", kGpt, "--fold-harder"}},
      {"error_option_missing_value", {"replay", kGpt, "--report"}},
      {"error_replay_missing_graph_argument", {"replay"}},
      {"error_validate_missing_graph_argument", {"validate"}},
      {"error_replay_missing_file", {"replay", "examples/graphs/no_such_graph.json"}},
      {"error_validate_missing_file", {"validate", "examples/graphs/no_such_graph.json"}},
      {"error_replay_malformed_json", {"replay", "tests/cli/data/malformed.json"}},
      {"error_validate_malformed_json", {"validate", "tests/cli/data/malformed.json"}},
      {"error_validate_invalid_graph", {"validate", "tests/cli/data/invalid_graph.json"}},
      {"error_replay_invalid_graph", {"replay", "tests/cli/data/invalid_graph.json"}},
      {"error_trace_ranks_syntax",
       {"replay", kGpt, "--trace", "{tmp}/t.json", "--trace-ranks", "0,x"}},
      {"error_trace_ranks_out_of_range",
       {"replay", kGpt, "--trace", "{tmp}/t.json", "--trace-ranks", "0-3,9"}},
      {"error_trace_ranks_reversed",
       {"replay", kGpt, "--trace", "{tmp}/t.json", "--trace-ranks", "5-2"}},
      {"error_trace_ranks_negative",
       {"replay", kGpt, "--trace", "{tmp}/t.json", "--trace-ranks=-1,2"}},
      {"error_trace_ranks_duplicate",
       {"replay", kGpt, "--trace", "{tmp}/t.json", "--trace-ranks", "1,1"}},
      {"error_trace_ranks_empty", {"replay", kGpt, "--trace", "{tmp}/t.json", "--trace-ranks", ""}},
      {"error_trace_ranks_without_trace", {"replay", kGpt, "--trace-ranks", "0"}},
      {"error_trace_level_unknown",
       {"replay", kGpt, "--trace", "{tmp}/t.json", "--trace-level", "layers"}},
      {"error_trace_level_without_trace", {"replay", kGpt, "--trace-level", "ops"}},
      {"error_replay_unknown_cluster", {"replay", kGpt, "--cluster", "dgx-z9"}},
      {"error_replay_cluster_nodes_too_small",
       {"replay", kGpt, "--cluster", "tests/cli/data/cluster_two_gpus.yaml"}},
      {"error_replay_nccl_algo", {"replay", kGpt, "--nccl-algo", "Rings"}},
      // Once a failed check (abort) inside the replay: PAT runs no all-reduce.
      {"error_replay_nccl_algo_leaves_none", {"replay", kGpt, "--nccl-algo", "PAT"}},
      {"error_collective_op", {"collective", "--op", "scan"}},
      {"error_collective_size", {"collective", "--max-bytes", "8Q"}},
      {"error_collective_sizes_reversed", {"collective", "-b", "1M", "-e", "1K"}},
      {"error_collective_num_gpus", {"collective", "--num-gpus", "12"}},
      {"error_collective_num_gpus_zero", {"collective", "--num-gpus", "0"}},
      {"error_collective_dtype", {"collective", "-d", "fp128"}},
      {"error_collective_redop", {"collective", "-o", "xor"}},
      {"error_collective_root", {"collective", "--op", "reduce", "-r", "8"}},
      {"error_collective_ngpus_zero", {"collective", "-g", "0"}},
      {"error_collective_ngpus_and_num_gpus", {"collective", "-g", "8", "--num-gpus", "16"}},
      {"error_collective_nthreads", {"collective", "-t", "0"}},
      {"error_collective_cluster_field",
       {"collective", "--cluster", "tests/cli/data/cluster_bad_field.yaml"}},
      {"error_collective_cluster_missing", {"collective", "--cluster", "no/such/cluster.yaml"}},
      {"error_collective_no_algorithm", {"collective", "--algo", "PAT"}},
      {"error_collective_report_empty", {"collective", "--report", ""}},
      {"error_gpu_tflops_too_large", {"replay", kGpt, "--gpu-tflops", "1e300"}},
      {"error_hbm_bw_not_a_number", {"replay", kGpt, "--hbm-bw", "fast"}},
      {"error_report_empty_path", {"replay", kGpt, "--report", ""}},
      {"error_trace_empty_path", {"replay", kGpt, "--trace", ""}},
      {"error_report_unwritable",
       {"replay", kGpt, "--report", "/nonexistent-prism-dir/report.json"}},
      {"error_trace_unwritable", {"replay", kGpt, "--trace", "/nonexistent-prism-dir/trace.json"}},
      // Checked before the replay: a report beside a trace that cannot be
      // written is not left behind (nothing is written, the golden's files
      // list stays empty).
      {"error_trace_unwritable_with_report",
       {"replay", kGpt, "--report", "{tmp}/report.json", "--trace",
        "/nonexistent-prism-dir/trace.json"}},
      {"error_trace_is_a_folder", {"replay", kGpt, "--trace", "{tmp}"}},
      // --html is checked with the other outputs before the work: none of
      // them is written when one cannot be.
      {"error_html_unwritable_with_report",
       {"replay", kGpt, "--report", "{tmp}/report.json", "--html",
        "/nonexistent-prism-dir/report.html"}},
      {"error_html_is_a_folder", {"replay", kGpt, "--html", "{tmp}"}},
      {"error_html_and_report_same_file",
       {"replay", kGpt, "--report", "{tmp}/out", "--html", "{tmp}/./out"}},
      {"error_simulate_html_unwritable_with_trace",
       {"simulate", kJob, "--no-kernel-db", "--trace", "{tmp}/t.json", "--html",
        "/nonexistent-prism-dir/s.html"}},
      {"error_search_html_unwritable_with_csv",
       {"search", kJob, "--no-kernel-db", "--tp", "2", "--pp", "2", "--csv", "{tmp}/all.csv",
        "--html", "/nonexistent-prism-dir/s.html"}},
      {"error_emulate_html_unwritable",
       {"emulate", kJob, "--real-ranks", "0", "--report", "{tmp}/r.json", "--html",
        "/nonexistent-prism-dir/e.html", "--", "true"}},
      {"error_report_and_trace_same_file",
       {"replay", kGpt, "--report", "{tmp}/out.json", "--trace", "{tmp}/./out.json"}},
      {"error_replay_directory", {"replay", "tests/cli/data"}},
      {"error_validate_directory", {"validate", "tests/cli/data/"}},
      {"error_report_overwrites_graph",
       {"replay", "{tmp}/g.json", "--report", "{tmp}/./g.json"},
       {},
       {{kGpt, "g.json"}}},
      {"error_trace_overwrites_graph",
       {"replay", "{tmp}/g.json", "--report", "{tmp}/r.json", "--trace", "{tmp}/g.json"},
       {},
       {{kGpt, "g.json"}}},
      {"error_validate_duplicate_field", {"validate", "tests/cli/data/duplicate_field.json"}},
      // Job specs: simulate and build (the compute model only, unless a test
      // database is given, so that the shipped database can change).
      {"simulate_help", {"simulate", "--help"}},
      {"build_help", {"build", "--help"}},
      // An FP8 run's MFU against the bf16 and the fp8 peak, in the text and the report.
      {"simulate_small_fp8",
       {"simulate", kJob, "--no-kernel-db", "--set", "training.precision=fp8", "--report",
        "{tmp}/report.json"},
       {"report.json"}},
      {"simulate_small",
       {"simulate", kJob, "--no-kernel-db", "--report", "{tmp}/report.json", "--kernels",
        "{tmp}/kernels.csv"},
       {"report.json", "kernels.csv"}},
      {"simulate_small_no_fold", {"simulate", kJob, "--no-kernel-db", "--no-fold"}},
      // CUDA graphs and a release: the same prediction as simulate_small
      // (docs/job-spec.md, `training`); refused with
      // expandable segments, and a field the release lacks refused by name.
      {"simulate_small_cuda_graphs",
       {"simulate", kJob, "--no-kernel-db", "--set", "training.enable_cuda_graph=true", "--set",
        "software.nemo=24.09"}},
      {"error_simulate_cuda_graphs_expandable",
       {"simulate", kJob, "--no-kernel-db", "--set", "training.enable_cuda_graph=true",
        "--alloc-conf", "expandable_segments:True"}},
      {"error_simulate_software_release",
       {"simulate", kJob, "--no-kernel-db", "--set", "software.nemo=24.07", "--set",
        "training.precision=fp8", "--set", "training.fp8_recipe=tensorwise"}},
      {"simulate_small_set",
       {"simulate", kJob, "--no-kernel-db", "--set", "parallelism.pipeline_model_parallel_size=1",
        "--set", "training.recompute=full", "--set", "parallelism.context_parallel_size=2", "--set",
        "name=gpt-small-cp2"}},
      {"simulate_small_kernel_db",
       {"simulate", kJob, "--kernel-db", "tests/cli/data/kernels_small.csv", "--report",
        "{tmp}/report.json"},
       {"report.json"}},
      {"build_small",
       {"build", kJob, "--no-kernel-db", "-o", "{tmp}/graph.json"},
       {},
       {},
       {"graph.json"}},
      // Memory: allocator settings, and out of memory as an outcome (exit 4).
      {"simulate_small_expandable",
       {"simulate", kJob, "--no-kernel-db", "--alloc-conf", "expandable_segments:True"}},
      {"simulate_small_oom",
       {"simulate", kJob, "--no-kernel-db", "--memory-fraction", "0.005", "--report",
        "{tmp}/report.json"},
       {"report.json"}},
      {"replay_gpt_oom",
       {"replay", kGpt, "--memory-fraction", "0.01", "--report", "{tmp}/report.json"},
       {"report.json"}},
      {"replay_gpt_past_oom",
       {"replay", kGpt, "--memory-fraction", "0.01", "--continue-past-oom", "--report",
        "{tmp}/report.json"},
       {"report.json"}},
      // What-if (issue 25): a straggler, jitter; a rank outside the world and
      // a jitter out of range are refused naming the option.
      {"replay_gpt_straggler",
       {"replay", kGpt, "--straggler", "5:1.5", "--straggler", "0-1:1.1", "--report",
        "{tmp}/report.json"},
       {"report.json"}},
      {"simulate_small_jitter",
       {"simulate", kJob, "--no-kernel-db", "--jitter", "5:42", "--report", "{tmp}/report.json"},
       {"report.json"}},
      {"error_straggler_outside_world", {"replay", kGpt, "--straggler", "0,9:2"}},
      {"error_jitter_out_of_range", {"simulate", kJob, "--no-kernel-db", "--jitter", "100"}},
      // A degraded link, a node failure (with its trace: the failure and the
      // blocked ops), and one refusal per bad input, each naming its option.
      {"replay_gpt_link_degrade",
       {"replay", kGpt, "--link-degrade", "node:1:4", "--report", "{tmp}/report.json"},
       {"report.json"}},
      {"simulate_small_link_degrade",
       {"simulate", kJob, "--no-kernel-db", "--link-degrade", "rail:2:4", "--link-degrade",
        "nvlink:0:2"}},
      {"replay_gpt_fail_node",
       {"replay", kGpt, "--fail-node", "1@3ms", "--nccl-timeout", "30s", "--report",
        "{tmp}/report.json", "--trace", "{tmp}/trace.json", "--trace-ranks", "0,4"},
       {"report.json", "trace.json"}},
      {"simulate_small_fail_node",
       {"simulate", kJob, "--no-kernel-db", "--fail-node", "0@500us", "--report",
        "{tmp}/report.json"},
       {"report.json"}},
      {"error_link_degrade_unknown_part", {"replay", kGpt, "--link-degrade", "spine:0:2"}},
      {"error_link_degrade_no_such_node", {"replay", kGpt, "--link-degrade", "node:2:2"}},
      {"error_link_degrade_factor_below_one",
       {"simulate", kJob, "--no-kernel-db", "--link-degrade", "rail:0:0.5"}},
      {"error_fail_node_after_iteration", {"replay", kGpt, "--fail-node", "1@1s"}},
      {"error_fail_node_no_such_node",
       {"simulate", kJob, "--no-kernel-db", "--fail-node", "5@1ms"}},
      {"error_fail_node_malformed", {"replay", kGpt, "--fail-node", "1"}},
      {"error_nccl_timeout_without_fail_node", {"replay", kGpt, "--nccl-timeout", "30s"}},
      {"error_nccl_timeout_zero", {"replay", kGpt, "--fail-node", "1@3ms", "--nccl-timeout", "0"}},
      // prism emulate's what-if options: parsed as replay's, refused before
      // any rank starts (a straggler on a real rank, a failed node holding a
      // real rank, a fail time after the unperturbed prediction's end).
      {"error_emulate_straggler_real_rank",
       {"emulate", kJob, "--no-kernel-db", "--real-ranks", "0,15", "--straggler", "1,15:2", "--",
        "/bin/true"}},
      {"error_emulate_straggler_outside_world",
       {"emulate", kJob, "--no-kernel-db", "--real-ranks", "0", "--straggler", "16:2", "--",
        "/bin/true"}},
      {"error_emulate_jitter_malformed",
       {"emulate", kJob, "--no-kernel-db", "--real-ranks", "0", "--jitter", "5:x", "--",
        "/bin/true"}},
      {"error_emulate_link_degrade_no_such_node",
       {"emulate", kJob, "--no-kernel-db", "--real-ranks", "0", "--link-degrade", "node:2:2", "--",
        "/bin/true"}},
      {"error_emulate_fail_node_real_rank",
       {"emulate", kJob, "--no-kernel-db", "--real-ranks", "0,9", "--fail-node", "1@1ms", "--",
        "/bin/true"}},
      {"error_emulate_fail_node_after_iteration",
       {"emulate", kJob, "--no-kernel-db", "--real-ranks", "0", "--fail-node", "1@1s", "--",
        "/bin/true"}},
      {"error_emulate_fail_node_no_such_node",
       {"emulate", kJob, "--no-kernel-db", "--real-ranks", "0", "--fail-node", "2@1ms", "--",
        "/bin/true"}},
      {"error_emulate_nccl_timeout_without_fail_node",
       {"emulate", kJob, "--no-kernel-db", "--real-ranks", "0", "--nccl-timeout", "30s", "--",
        "/bin/true"}},
      // Search: the default space of the small job (exact ranking), a
      // narrower one with out-of-memory configurations and every output.
      {"search_help", {"search", "--help"}},
      {"search_small", {"search", kJob, "--no-kernel-db", "--top", "5"}},
      {"search_small_oom",
       {"search",
        kJob,
        "--no-kernel-db",
        "--tp",
        "1,2,4",
        "--pp",
        "1,2,4",
        "--vpp",
        "1,2",
        "--cp",
        "1,2",
        "--mbs",
        "1,2",
        "--recompute",
        "none,full",
        "--memory-fraction",
        "0.008",
        "-j",
        "2",
        "--csv",
        "{tmp}/search.csv",
        "--report",
        "{tmp}/search.json"},
       {"search.csv", "search.json"}},
      {"search_small_nothing_fits",
       {"search", kJob, "--no-kernel-db", "--tp", "2", "--pp", "2", "--vpp", "1", "--cp", "1",
        "--mbs", "1", "--recompute", "none", "--memory-fraction", "0.001"}},
      {"error_search_tp_impossible", {"search", kJob, "--no-kernel-db", "--tp", "3,5"}},
      {"error_search_mbs_impossible", {"search", kJob, "--no-kernel-db", "--mbs", "3"}},
      {"error_search_empty_space",
       {"search", kJob, "--no-kernel-db", "--tp", "4", "--pp", "4", "--cp", "2"}},
      {"error_search_range_backwards", {"search", kJob, "--no-kernel-db", "--pp", "4-2"}},
      {"error_search_list_not_a_number", {"search", kJob, "--no-kernel-db", "--vpp", "1,x"}},
      {"error_search_list_empty_item", {"search", kJob, "--no-kernel-db", "--cp", "1,,2"}},
      {"error_search_recompute", {"search", kJob, "--no-kernel-db", "--recompute", "some"}},
      {"error_search_switch",
       {"search", kJob, "--no-kernel-db", "--distributed-optimizer", "maybe"}},
      {"error_search_too_many",
       {"search", kJob, "--no-kernel-db", "--tp", "1-9999", "--pp", "1-9999"}},
      {"error_search_top_zero", {"search", kJob, "--no-kernel-db", "--top", "0"}},
      {"error_search_jobs_negative", {"search", kJob, "--no-kernel-db", "-j", "-1"}},
      {"error_search_csv_overwrites_job",
       {"search", "{tmp}/job.yaml", "--no-kernel-db", "--csv", "{tmp}/job.yaml"},
       {},
       {{kJob, "job.yaml"}}},
      {"error_search_program_job", {"search", "examples/jobs/ddp-gpt-64.yaml"}},
      // Past an OOM (issue 25): the same iteration with unlimited memory,
      // what each role needs and by how much it passes the GPU; exit 4.
      {"simulate_past_oom",
       {"simulate", "examples/jobs/mixtral-8x7b-h100-256.yaml", "--no-kernel-db", "--set",
        "training.seq_length=8192", "--set", "training.grad_reduce_in_fp32=true",
        "--continue-past-oom", "--report", "{tmp}/report.json"},
       {"report.json"}},
      // The shipped MoE example fits out of the box (issue 25).
      {"simulate_mixtral_example",
       {"simulate", "examples/jobs/mixtral-8x7b-h100-256.yaml", "--no-kernel-db"}},
      // Megatron-Bridge's 405B layout (issue 24): the embedding and the loss
      // counted in the pipeline split, interleaved.
      {"simulate_llama405b_example",
       {"simulate", "examples/jobs/llama3.1-405b-h100-1024.yaml", "--no-kernel-db"}},
      {"error_simulate_alloc_conf", {"simulate", kJob, "--alloc-conf", "max_split_size_mb:16"}},
      {"error_simulate_alloc_conf_backend",
       {"simulate", kJob, "--alloc-conf", "backend:cudaMallocAsync"}},
      {"error_replay_memory_fraction", {"replay", kGpt, "--memory-fraction", "1.5"}},
      {"error_replay_memory_fraction_zero", {"replay", kGpt, "--memory-fraction", "0"}},
      {"error_simulate_missing_job_argument", {"simulate"}},
      {"error_simulate_missing_file", {"simulate", "tests/cli/data/no_such_job.yaml"}},
      {"error_simulate_directory", {"simulate", "tests/cli/data"}},
      // A value of 500 bytes with a control byte, quoted back: one printable,
      // bounded line (issue 26).
      {"error_simulate_long_value",
       {"simulate", kJob, "--set", "model.preset=\x1b" + std::string(500, 'x')}},
      // Bounded work (issue 26): an absurd global batch is refused at once.
      {"error_simulate_absurd_global_batch",
       {"simulate", kJob, "--set", "training.global_batch_size=16777216"}},
      {"error_simulate_malformed_yaml", {"simulate", "tests/cli/data/job_malformed.yaml"}},
      {"error_simulate_unknown_field", {"simulate", "tests/cli/data/job_unknown_field.yaml"}},
      {"error_simulate_set_without_equals",
       {"simulate", kJob, "--set", "parallelism.tensor_model_parallel_size"}},
      {"error_simulate_set_unknown_section", {"simulate", kJob, "--set", "optimizer.lr=0.1"}},
      {"error_simulate_set_unknown_field",
       {"simulate", kJob, "--set", "parallelism.tensor_parallel=4"}},
      {"error_simulate_set_bad_value", {"simulate", kJob, "--set", "training.recompute=all"}},
      {"error_simulate_set_impossible",
       {"simulate", kJob, "--set", "parallelism.tensor_model_parallel_size=3"}},
      {"error_simulate_set_unknown_cluster", {"simulate", kJob, "--set", "cluster.preset=dgx-z9"}},
      {"error_simulate_heads_not_divisible_by_tp",
       {"simulate", "tests/cli/data/job_heads_tp.yaml"}},
      {"error_simulate_kernel_db_malformed",
       {"simulate", kJob, "--kernel-db", "tests/cli/data/kernels_malformed.csv"}},
      {"error_simulate_kernel_db_missing",
       {"simulate", kJob, "--kernel-db", "tests/cli/data/no_such_kernels.csv"}},
      {"error_simulate_no_kernel_db_and_kernel_db",
       {"simulate", kJob, "--no-kernel-db", "--kernel-db", "tests/cli/data/kernels_small.csv"}},
      {"error_simulate_trace_ranks_out_of_range",
       {"simulate", kJob, "--no-kernel-db", "--trace", "{tmp}/t.json", "--trace-ranks", "0,16"}},
      {"error_simulate_trace_ranks_without_trace",
       {"simulate", kJob, "--no-kernel-db", "--trace-ranks", "0"}},
      {"error_simulate_trace_level_unknown",
       {"simulate", kJob, "--no-kernel-db", "--trace", "{tmp}/t.json", "--trace-level", "op"}},
      {"error_simulate_report_empty", {"simulate", kJob, "--no-kernel-db", "--report", ""}},
      {"error_simulate_trace_empty", {"simulate", kJob, "--no-kernel-db", "--trace", ""}},
      {"error_simulate_kernels_empty", {"simulate", kJob, "--no-kernel-db", "--kernels", ""}},
      {"error_simulate_report_unwritable",
       {"simulate", kJob, "--no-kernel-db", "--report", "/nonexistent-prism-dir/report.json"}},
      {"error_simulate_nccl_algo", {"simulate", kJob, "--no-kernel-db", "--nccl-algo", "Rings"}},
      {"error_simulate_nccl_algo_leaves_none",
       {"simulate", kJob, "--no-kernel-db", "--nccl-algo", "Tree"}},
      {"error_simulate_report_overwrites_job",
       {"simulate", "{tmp}/job.yaml", "--no-kernel-db", "--report", "{tmp}/./job.yaml"},
       {},
       {{kJob, "job.yaml"}}},
      {"error_simulate_report_and_trace_same_file",
       {"simulate", kJob, "--no-kernel-db", "--report", "{tmp}/out.json", "--trace",
        "{tmp}/./out.json"}},
      {"error_build_output_overwrites_job",
       {"build", "{tmp}/job.yaml", "--no-kernel-db", "-o", "{tmp}/job.yaml"},
       {},
       {{kJob, "job.yaml"}}},
      {"error_build_missing_output", {"build", kJob}},
      {"error_build_output_empty", {"build", kJob, "-o", ""}},
      {"error_build_malformed_yaml",
       {"build", "tests/cli/data/job_malformed.yaml", "-o", "{tmp}/graph.json"}},
      {"error_build_heads_not_divisible_by_tp",
       {"build", "tests/cli/data/job_heads_tp.yaml", "-o", "{tmp}/graph.json"}},
      // Memory histories (tests/mem/data/make_snapshots.py): 0 when the model
      // reproduces the recording, 5 when it diverges.
      {"memory_help", {"memory", "--help"}},
      {"memory_replay_help", {"memory", "replay", "--help"}},
      {"memory_replay_basic", {"memory", "replay", kMemData + "basic.json", "--strict"}},
      {"memory_replay_record_stream_report",
       {"memory", "replay", kMemData + "record_stream.json", "--report", "{tmp}/report.json"},
       {"report.json"}},
      {"memory_replay_expandable", {"memory", "replay", kMemData + "expandable.json"}},
      {"memory_replay_max_split", {"memory", "replay", kMemData + "max_split.json"}},
      {"memory_replay_diverging", {"memory", "replay", kMemData + "diverging.json"}},
      // Recorded on an H100 with torch 2.11 (tests/mem/data/h100-torch2.11).
      {"memory_replay_h100_gpt_bf16",
       {"memory", "replay", kMemData + "h100-torch2.11/gpt_bf16.json", "--strict"}},
      {"memory_replay_h100_retry_oom",
       {"memory", "replay", kMemData + "h100-torch2.11/retry_oom.json", "--strict"}},
      {"memory_replay_wrong_alloc_conf",
       {"memory", "replay", kMemData + "max_split.json", "--alloc-conf", "max_split_size_mb:200",
        "--report", "{tmp}/report.json"},
       {"report.json"}},
      {"memory_replay_settings_misfit",
       {"memory", "replay", kMemData + "basic.json", "--alloc-conf", "roundup_power2_divisions:2"}},
      {"memory_replay_small_capacity",
       {"memory", "replay", kMemData + "basic.json", "--capacity-gib", "0.04"}},
      {"error_memory_no_subcommand", {"memory"}},
      {"error_memory_replay_missing_argument", {"memory", "replay"}},
      {"error_memory_replay_missing_file", {"memory", "replay", kMemData + "no_such.json"}},
      {"error_memory_replay_malformed_json", {"memory", "replay", "tests/cli/data/malformed.json"}},
      {"error_memory_replay_pickle", {"memory", "replay", "tests/cli/data/memory_snapshot.pickle"}},
      {"error_memory_replay_late_start",
       {"memory", "replay", "tests/cli/data/memory_late_start.json"}},
      {"error_memory_replay_alloc_conf",
       {"memory", "replay", kMemData + "basic.json", "--alloc-conf", "max_split_size_mb:10"}},
      {"error_memory_replay_capacity",
       {"memory", "replay", kMemData + "basic.json", "--capacity-gib", "-1"}},
      {"error_memory_replay_report_overwrites_snapshot",
       {"memory", "replay", "{tmp}/s.json", "--report", "{tmp}/./s.json"},
       {},
       {{kMemData + "basic.json", "s.json"}}},
  };
}

INSTANTIATE_TEST_SUITE_P(Cli, CliGoldenTest, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

// Property: the same command gives byte-identical files, and folding changes
// nothing but the fields that say how the replay ran.
class CliDeterminismTest : public CliGoldenTest {};

std::string without_run_fields(const std::string& report) {
  std::string out;
  std::size_t at = 0;
  while (at < report.size()) {
    std::size_t end = report.find('\n', at);
    if (end == std::string::npos) end = report.size();
    const std::string line = report.substr(at, end - at);
    if (line.find("\"folded\"") == std::string::npos &&
        line.find("\"simulated_ranks\"") == std::string::npos &&
        line.find("\"op_events\"") == std::string::npos)
      out += line + "\n";
    at = end + 1;
  }
  return out;
}

TEST_F(CliDeterminismTest, RepeatedAndFoldedRunsAgree) {
  std::vector<std::string> reports, traces;
  for (const char* mode : {"--no-fold", "--no-fold", "", ""}) {
    const std::string tag = std::to_string(reports.size());
    std::vector<std::string> args = {"replay",        kGpt,      "--report",
                                     "{tmp}/r" + tag, "--trace", "{tmp}/t" + tag,
                                     "--trace-ranks", "0-7"};
    if (*mode != '\0') args.emplace_back(mode);
    ASSERT_EQ(run_prism(args, tmp_).exit_status, 0);
    reports.push_back(slurp(fs::path(tmp_) / ("r" + tag)));
    traces.push_back(slurp(fs::path(tmp_) / ("t" + tag)));
    ASSERT_FALSE(reports.back().empty());
  }
  EXPECT_EQ(reports[0], reports[1]);
  EXPECT_EQ(traces[0], traces[1]);
  EXPECT_EQ(reports[2], reports[3]);
  EXPECT_EQ(traces[2], traces[3]);
  EXPECT_NE(reports[0], reports[2]);  // they do differ in how they ran
  EXPECT_EQ(without_run_fields(reports[0]), without_run_fields(reports[2]));
  EXPECT_EQ(traces[0], traces[2]);
}

// --html: the same page twice, and the trace beside it as it is without
// --html (the ranks traced for the page stay out of it).
TEST_F(CliDeterminismTest, HtmlRepeatsAndLeavesTheTraceAlone) {
  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"replay", kGpt}, {"simulate", kJob, "--no-kernel-db"}}) {
    std::vector<std::string> plain = command;
    for (const char* a : {"--trace", "{tmp}/t_plain", "--trace-ranks", "1"}) plain.emplace_back(a);
    ASSERT_EQ(run_prism(plain, tmp_).exit_status, 0);
    std::vector<std::string> pages;
    for (const char* tag : {"a", "b"}) {
      std::vector<std::string> args = command;
      for (const std::string& a :
           {std::string("--trace"), "{tmp}/t_" + std::string(tag), std::string("--trace-ranks"),
            std::string("1"), std::string("--html"), "{tmp}/h_" + std::string(tag)})
        args.push_back(a);
      ASSERT_EQ(run_prism(args, tmp_).exit_status, 0);
      pages.push_back(slurp(fs::path(tmp_) / ("h_" + std::string(tag))));
      EXPECT_EQ(slurp(fs::path(tmp_) / ("t_" + std::string(tag))),
                slurp(fs::path(tmp_) / "t_plain"))
          << command[0];
    }
    EXPECT_EQ(pages[0], pages[1]) << command[0];
    for (const char* section : {"timeline", "breakdown", "memory", "collectives"})
      EXPECT_NE(pages[0].find(std::string("<section id=\"") + section + "\">"), std::string::npos)
          << command[0] << " " << section;
  }
}

// Issue 25: at the default --trace-level a trace of 4 ranks of the 70B job
// (1,024 GPUs) stays within 10 MB (docs/benchmarks.md has the figures of
// each level), and is the same twice.
TEST_F(CliDeterminismTest, TraceOfFourRanksOfThe70BJobFitsTenMegabytes) {
  std::vector<std::string> traces;
  for (const char* tag : {"a", "b"}) {
    const RunResult r = run_prism({"simulate", "bench/jobs/llama3.1-70b-1024.yaml", "--trace",
                                   std::string("{tmp}/t") + tag, "--trace-ranks", "0,1,2,3"},
                                  tmp_);
    ASSERT_EQ(r.exit_status, 0) << r.err;
    traces.push_back(slurp(fs::path(tmp_) / (std::string("t") + tag)));
  }
  EXPECT_EQ(traces[0], traces[1]);
  const std::size_t bytes = traces[0].size();
  RecordProperty("trace_bytes", std::to_string(bytes));
  EXPECT_LE(bytes, 10'000'000u);
  EXPECT_GT(bytes, 100'000u);  // it holds the 4 ranks' phases, not nothing
  for (const char* rank : {"rank 0 (", "rank 1 (", "rank 2 (", "rank 3 ("})
    EXPECT_NE(traces[0].find(rank), std::string::npos) << rank;
  EXPECT_NE(traces[0].find(R"("cat":"phase")"), std::string::npos);
  EXPECT_NE(traces[0].find(R"("name":"iteration 0","cat":"iteration")"), std::string::npos);
}

// A graph built from a job replays on the job's own cluster: `prism replay`
// of it gives `prism simulate`'s iteration (it once replayed every graph on a
// DGX H100 unless told otherwise); --cluster still overrides it.
TEST_F(CliDeterminismTest, ABuiltGraphReplaysOnItsJobsCluster) {
  std::string job = slurp(fs::path(PRISM_SOURCE_DIR) / kJob);
  const std::size_t at = job.find("preset: dgx-h100");
  ASSERT_NE(at, std::string::npos);
  job.replace(at, std::string("preset: dgx-h100").size(), "preset: dgx-a100");
  std::ofstream(fs::path(tmp_) / "job.yaml") << job;
  const auto iteration = [](const std::string& report) {
    const std::string key = "\"iteration_time_s\": ";
    const std::size_t k = report.find(key);
    return k == std::string::npos ? -1.0 : std::stod(report.substr(k + key.size()));
  };
  ASSERT_EQ(
      run_prism({"simulate", "{tmp}/job.yaml", "--no-kernel-db", "--report", "{tmp}/s.json"}, tmp_)
          .exit_status,
      0);
  ASSERT_EQ(run_prism({"build", "{tmp}/job.yaml", "--no-kernel-db", "-o", "{tmp}/g.json"}, tmp_)
                .exit_status,
            0);
  ASSERT_EQ(run_prism({"replay", "{tmp}/g.json", "--report", "{tmp}/r.json"}, tmp_).exit_status, 0);
  ASSERT_EQ(
      run_prism({"replay", "{tmp}/g.json", "--cluster", "dgx-h100", "--report", "{tmp}/h.json"},
                tmp_)
          .exit_status,
      0);
  const double simulated = iteration(slurp(fs::path(tmp_) / "s.json"));
  ASSERT_GT(simulated, 0);
  // The same nanoseconds (simulate computes its seconds another way).
  EXPECT_NEAR(iteration(slurp(fs::path(tmp_) / "r.json")), simulated, 1e-12);
  EXPECT_GT(std::abs(iteration(slurp(fs::path(tmp_) / "h.json")) - simulated), 1e-6);
  EXPECT_NE(slurp(fs::path(tmp_) / "g.json").find("\"cluster\": \"name: \\\"dgx-a100\\\""),
            std::string::npos);
}

// The same for `prism simulate`: folding changes neither the report (but for
// how the replay ran) nor the traces of ranks of both roles.
TEST_F(CliDeterminismTest, SimulateFoldedAndUnfoldedAgree) {
  std::vector<std::string> reports, traces;
  for (const char* mode : {"--no-fold", ""}) {
    const std::string tag = std::to_string(reports.size());
    std::vector<std::string> args = {"simulate",
                                     kJob,
                                     "--no-kernel-db",
                                     "--report",
                                     "{tmp}/r" + tag,
                                     "--trace",
                                     "{tmp}/t" + tag,
                                     "--trace-ranks",
                                     "0,9"};
    if (*mode != '\0') args.emplace_back(mode);
    ASSERT_EQ(run_prism(args, tmp_).exit_status, 0);
    reports.push_back(slurp(fs::path(tmp_) / ("r" + tag)));
    traces.push_back(slurp(fs::path(tmp_) / ("t" + tag)));
    ASSERT_FALSE(reports.back().empty());
    ASSERT_FALSE(traces.back().empty());
  }
  EXPECT_NE(reports[0], reports[1]);
  EXPECT_EQ(without_run_fields(reports[0]), without_run_fields(reports[1]));
  EXPECT_EQ(traces[0], traces[1]);
}

// `prism search` writes the same files whatever its thread count.
TEST_F(CliDeterminismTest, SearchIsTheSameOnOneThreadAndOnThree) {
  std::vector<std::string> outs;
  for (const char* jobs : {"1", "3"}) {
    const std::string tag = jobs;
    const RunResult run =
        run_prism({"search", kJob, "--no-kernel-db", "--vpp", "1,2", "--cp", "1,2", "-j", jobs,
                   "--csv", "{tmp}/c" + tag, "--report", "{tmp}/r" + tag},
                  tmp_);
    ASSERT_EQ(run.exit_status, 0) << run.err;
    outs.push_back(run.out + slurp(fs::path(tmp_) / ("c" + tag)) +
                   slurp(fs::path(tmp_) / ("r" + tag)));
  }
  EXPECT_EQ(outs[0], outs[1]);
}

}  // namespace
}  // namespace prism
