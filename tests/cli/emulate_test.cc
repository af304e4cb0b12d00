// `prism emulate` end to end: real rank_player processes against the
// coordinator, on the small GPT job of the golden tests (16 ranks, a 10 ms
// iteration). Emulated times depend on this machine's real timing, so these
// tests check structure and loose bounds; docs/validation.md records the
// fidelity experiment with its figures. Every fault must end the run with one
// clear error, quickly.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "run_prism.h"

namespace prism {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;
using testing::run_prism;
using testing::RunResult;
using testing::slurp;
namespace fs = std::filesystem;

const std::string kPlayer = PRISM_BINARY_DIR "/bin/rank_player";
const std::string kJob = "tests/cli/data/job_small.yaml";

class EmulateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "prism_emulate_test.XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    tmp_ = templ;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }
  RunResult emulate(const std::string& ranks, std::vector<std::string> program,
                    std::vector<std::string> options = {}) {
    // Any free port for the rendezvous store, so that tests can run at once.
    std::vector<std::string> args = {"emulate", kJob, "--real-ranks", ranks, "--master-port", "0"};
    args.insert(args.end(), options.begin(), options.end());
    args.push_back("--");
    args.insert(args.end(), program.begin(), program.end());
    const auto start = std::chrono::steady_clock::now();
    RunResult r = run_prism(args, tmp_);
    seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return r;
  }
  std::string tmp_;
  double seconds_ = 0;
};

TEST_F(EmulateTest, RealRanksPlayTheirPartAndGetTheReplayedTime) {
  const RunResult r =
      emulate("0,15", {kPlayer},
              {"--report", "{tmp}/r.json", "--trace", "{tmp}/t.json", "--capture", "{tmp}/cap"});
  ASSERT_EQ(r.exit_status, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("[rank0]: rank_player: rank 0: done"));
  EXPECT_THAT(r.out, HasSubstr("[rank15]: rank_player: rank 15: done"));
  EXPECT_THAT(r.out, HasSubstr("job:                gpt-small (16 ranks), 2 real: "));

  const nlohmann::json j = nlohmann::json::parse(slurp(fs::path(tmp_) / "r.json"));
  EXPECT_EQ(j["world_size"], 16);
  ASSERT_EQ(j["real_ranks"].size(), 2u);
  for (const auto& rank : j["real_ranks"]) {
    const double it = rank["iteration_time_s"], predicted = rank["predicted_iteration_time_s"];
    EXPECT_GT(predicted, 0.009);
    // Loose: this machine may be busy. docs/validation.md has the figures.
    EXPECT_GT(it, predicted * 0.99);
    EXPECT_LT(it, predicted * 1.5);
    EXPECT_NEAR(rank["compute_s"].get<double>() + rank["wait_s"].get<double>(), it, 1e-9);
    EXPECT_GT(rank["compute_s"].get<double>(), 0.002);
    EXPECT_EQ(rank["exit_code"], 0);
  }
  EXPECT_EQ(j["real_ranks"][0]["rank"], 0);
  EXPECT_EQ(j["real_ranks"][0]["ops"], 99);  // its communication ops in the graph

  const std::string trace = slurp(fs::path(tmp_) / "t.json");
  EXPECT_THAT(trace, HasSubstr(R"x("name":"rank 0 (stage0, real)")x"));
  EXPECT_THAT(trace, HasSubstr(R"x("name":"rank 15 (stage1, real)")x"));
  EXPECT_THAT(trace, HasSubstr(R"x("args":{"labels":"real"})x"));
  // The real ranks' measured compute beside their communication, and their
  // host threads filled with it and the waits between.
  EXPECT_THAT(trace, HasSubstr(R"("cat":"compute","ph":"X")"));
  EXPECT_THAT(trace, HasSubstr(R"("args":{"measured":true})"));
  EXPECT_THAT(trace, HasSubstr(R"("args":{"name":"host"})"));
  EXPECT_THAT(trace, HasSubstr(R"({"name":"wait","cat":"wait","ph":"X")"));
  EXPECT_THAT(trace, HasSubstr(R"({"name":"compute","cat":"compute","ph":"X")"));
  // Its iterations, from the markers it reported.
  EXPECT_THAT(trace, HasSubstr(R"({"name":"iteration 0","cat":"iteration","ph":"X")"));

  const std::string capture = slurp(fs::path(tmp_) / "cap" / "rank15.json");
  EXPECT_THAT(capture, HasSubstr(R"("format":"prism-capture")"));
  EXPECT_THAT(capture, HasSubstr(R"("type":"compute")"));
  EXPECT_THAT(capture, HasSubstr(R"("type":"complete")"));
  EXPECT_THAT(capture, HasSubstr(R"("type":"bye")"));
}

TEST_F(EmulateTest, RealRanksReachTheCoordinatorOverTcp) {
  // As ranks on another host would: PRISM_COORDINATOR is tcp:HOST:PORT.
  const RunResult r = emulate("0", {kPlayer}, {"--listen", "tcp:127.0.0.1:0"});
  ASSERT_EQ(r.exit_status, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("[rank0]: rank_player: rank 0: done"));
}

TEST_F(EmulateTest, KilledRankEndsTheRunWithItsLastOp) {
  const RunResult r = emulate("3", {kPlayer, "--die-after-ops", "5"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_THAT(r.err, MatchesRegex("error: live rank 3 \\(pid [0-9]+\\): .*connection closed "
                                  "without a bye; its last op: .* entered at [0-9.]+ ms; rank 3 "
                                  "\\(pid [0-9]+\\) killed by signal 9 \\(SIGKILL\\)\n"));
  EXPECT_LT(seconds_, 30);
}

TEST_F(EmulateTest, RankThatExitsBeforeConnectingIsNamed) {
  const RunResult r = emulate("2", {"/bin/sh", "-c", "echo starting; exit 7"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_EQ(r.out, "[rank2]: starting\n");
  EXPECT_THAT(r.err, MatchesRegex("error: real rank 2 \\(pid [0-9]+\\) exited with code 7 before "
                                  "it connected to the coordinator.*\n"));
}

TEST_F(EmulateTest, RankThatNeverConnectsTimesOut) {
  const RunResult r = emulate("0", {"sleep", "60"}, {"--timeout", "1"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_EQ(r.err, "error: live rank 0 did not connect within 1 s\n");
  EXPECT_LT(seconds_, 30);  // the sleeping rank was stopped, not waited for
}

TEST_F(EmulateTest, GarbageOnTheSocketEndsTheRun) {
  const RunResult r = emulate("0", {kPlayer, "--garbage"}, {"--timeout", "5"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_THAT(r.err, HasSubstr("error: a peer that never said hello: "));
  EXPECT_THAT(r.err, HasSubstr("bad magic 0x20544547 (expected 0x4d535250): not a PrismLLM peer"));
}

TEST_F(EmulateTest, ProgramThatDoesWhatTheGraphDoesNotIsAMismatch) {
  // The rank plays the graph of the same job with shorter sequences: its
  // collectives carry other bytes.
  ASSERT_EQ(
      run_prism({"build", kJob, "--set", "training.seq_length=1024", "-o", "{tmp}/g.json"}, tmp_)
          .exit_status,
      0);
  const RunResult r = emulate("0", {kPlayer, "--graph", tmp_ + "/g.json"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_THAT(r.err, HasSubstr("error: rank 0 op 0 ("));
  EXPECT_THAT(r.err, HasSubstr("the graph has all_gather of"));
  EXPECT_THAT(r.err, HasSubstr("the coordinator: rank 0 op 0"));  // the rank was told why
}

TEST_F(EmulateTest, RejectsBadArguments) {
  RunResult r = emulate("16", {kPlayer});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_THAT(r.err, HasSubstr("--real-ranks"));
  r = emulate("0", {"/nonexistent/program"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_EQ(r.err, "error: rank 0: cannot run '/nonexistent/program': No such file or directory\n");
  r = emulate("0", {kPlayer}, {"--trace", "{tmp}/t.json", "--trace-level", "layers"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_EQ(r.err,
            "error: --trace-level: unknown level 'layers': valid levels are ops, phases and "
            "iterations\n");
  EXPECT_FALSE(fs::exists(fs::path(tmp_) / "t.json"));
  r = run_prism({"emulate", kJob, "--real-ranks", "0"}, tmp_);
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_THAT(
      r.err, HasSubstr("no PROGRAM to run for the real ranks (after --), and no --external-ranks"));
}

// What-if options (docs/emulate.md, "What-if"): the virtual ranks and the
// network are perturbed, real rank 0 runs as it does. Rank 1 is its tensor-
// parallel partner, node 1 holds the second pipeline stage (ranks 8-15).
class EmulateWhatIfTest : public EmulateTest {
 protected:
  // The report of an emulation with real rank 0 and `what_if`.
  nlohmann::json run(std::vector<std::string> what_if) {
    what_if.insert(what_if.end(), {"--report", "{tmp}/r.json"});
    const RunResult r = emulate("0", {kPlayer}, what_if);
    EXPECT_EQ(r.exit_status, 0) << r.out << r.err;
    out_ = r.out;
    return nlohmann::json::parse(slurp(fs::path(tmp_) / "r.json"));
  }
  void expect_slower(const nlohmann::json& base, const nlohmann::json& perturbed,
                     const std::string& options, double at_least) {
    const double t0 = base["iteration_time_s"], t = perturbed["iteration_time_s"];
    const double p0 = base["predicted_iteration_time_s"];
    EXPECT_GT(t, t0 * at_least) << options;
    const nlohmann::json& w = perturbed["what_if"];
    EXPECT_EQ(w["options"], options);
    // The unperturbed replay without real ranks is the plain run's prediction.
    EXPECT_EQ(w["unperturbed_iteration_time_s"].get<double>(), p0);
    EXPECT_EQ(w["predicted_iteration_time_s"], perturbed["predicted_iteration_time_s"]);
    EXPECT_GT(w["delta_pct"].get<double>(), (at_least - 1) * 100);
    EXPECT_NEAR(w["emulated_delta_pct"].get<double>(), (t / p0 - 1) * 100, 1e-9);
    EXPECT_THAT(out_, HasSubstr("what-if:            " + options +
                                ": the replay without real ranks predicts "));
    EXPECT_FALSE(base.contains("what_if"));
  }
  std::string out_;
};

TEST_F(EmulateWhatIfTest, AStragglerOnAVirtualRankSlowsTheIteration) {
  const nlohmann::json base = run({});
  // Rank 1 computes twice as long: rank 0 waits for it in every tensor-
  // parallel collective (+5.5% predicted, the emulated step +3.6%: the last
  // stage's cross entropy is a large part of this small job's step); rank 9
  // in stage 1, +60%.
  expect_slower(base, run({"--straggler", "1:2"}), "--straggler 1:2", 1.02);
  expect_slower(base, run({"--straggler", "9:2"}), "--straggler 9:2", 1.3);
  const nlohmann::json jitter = run({"--jitter", "20:3"});
  expect_slower(base, jitter, "--jitter 20:3", 1.03);
  EXPECT_FALSE(jitter["folded"]);  // every virtual rank differs
}

TEST_F(EmulateWhatIfTest, ADegradedLinkSlowsTheIteration) {
  const nlohmann::json base = run({});
  // The pipeline's sends cross node 1's NICs.
  expect_slower(base, run({"--link-degrade", "node:1:4"}), "--link-degrade node:1:4", 1.3);
  // Rank 0's own NVLink domain at half bandwidth: never faster (+2% predicted).
  const nlohmann::json nvlink = run({"--link-degrade", "nvlink:0:2"});
  EXPECT_GT(nvlink["what_if"]["delta_pct"].get<double>(), 0);
  EXPECT_GT(nvlink["iteration_time_s"].get<double>(),
            base["iteration_time_s"].get<double>() * 0.99);
}

TEST_F(EmulateWhatIfTest, AStragglerOnARealRankIsRefused) {
  const RunResult r =
      emulate("0,15", {kPlayer}, {"--straggler", "1,15:2", "--report", "{tmp}/r.json"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_EQ(r.err,
            "error: --straggler 1,15:2: rank 15 is a real rank (--real-ranks 0,15): its compute "
            "is its own program's, measured as it runs; a straggler slows virtual ranks only\n");
  EXPECT_THAT(r.out, Not(HasSubstr("[rank")));  // no rank started
  EXPECT_FALSE(fs::exists(fs::path(tmp_) / "r.json"));
}

TEST_F(EmulateTest, AGivenGraphIsEmulatedInsteadOfTheModels) {
  RunResult r = run_prism({"build", kJob, "-o", "{tmp}/g.json"}, tmp_);
  ASSERT_EQ(r.exit_status, 0) << r.err;
  r = emulate(
      "0", {kPlayer},
      {"--graph", "{tmp}/g.json", "--report", "{tmp}/r.json", "--save-graph", "{tmp}/again.json"});
  ASSERT_EQ(r.exit_status, 0) << r.out << r.err;
  const auto report = nlohmann::json::parse(slurp(tmp_ + "/r.json"));
  EXPECT_EQ(report["real_ranks"][0]["ops"], report["real_ranks"][0]["graph_ops"]);
  // A model's graph holds no captured objects, and saved again stays so.
  EXPECT_EQ(slurp(tmp_ + "/again.json"), slurp(tmp_ + "/g.json"));

  // Captured objects that do not fit the graph (slicing/graph_objects.h):
  // one error line naming the file and the entry.
  auto bad = nlohmann::json::parse(slurp(tmp_ + "/g.json"));
  const int world = bad["layout"]["world_size"];
  const std::string role = bad["roles"][0]["name"];
  bad["captured"] = {{{"role", role}, {"rank", world}}};
  bad["objects"] = nlohmann::json::array();
  std::ofstream(tmp_ + "/bad.json") << bad.dump();
  r = emulate("0", {kPlayer}, {"--graph", "{tmp}/bad.json"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_EQ(r.err, "error: --graph: {tmp}/bad.json: captured 0: rank " + std::to_string(world) +
                       " of role \"" + role + "\" is not a rank of the graph (0 to " +
                       std::to_string(world - 1) + ")\n");

  fs::copy_file(testing::kSourceDir + "/" + kJob, tmp_ + "/not_a_graph.json");
  r = emulate("0", {kPlayer}, {"--graph", "{tmp}/not_a_graph.json"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_THAT(r.err, HasSubstr("error: --graph: "));
  r = emulate("0", {kPlayer}, {"--graph", "{tmp}/g.json", "--save-graph", "{tmp}/g.json"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_THAT(r.err, HasSubstr("--save-graph {tmp}/g.json is the --graph it would overwrite"));
  r = emulate("0", {kPlayer}, {"--graph", "{tmp}/g.json", "--slices", "{tmp}/s"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_THAT(r.err, HasSubstr("--graph excludes --slices"));
  r = emulate("0", {kPlayer}, {"--slices", "{tmp}/s"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_THAT(r.err, HasSubstr("has a model section, so its graph is the model's and no rank is "
                               "captured"));
  EXPECT_FALSE(fs::exists(tmp_ + "/s"));
  r = emulate("0", {kPlayer}, {"--capture-jobs", "2"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_THAT(r.err, HasSubstr("error: --capture-jobs 2: job 'gpt-small' has a model section"));
  r = emulate("0", {kPlayer}, {"--graph", "{tmp}/g.json", "--capture-jobs", "2"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_THAT(r.err, HasSubstr("--graph excludes --capture-jobs"));
  r = emulate("0", {kPlayer}, {"--capture-jobs", "0"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_THAT(r.err, HasSubstr("--capture-jobs"));
}

// Captures side by side: the first to fail stops the others. Rank 0 never
// connects (it sleeps), rank 1 exits at once; had rank 0's capture not been
// stopped, it would have failed on its own after --timeout and, being the
// lower role, been the error reported. (Rank 1 may even fail before rank
// 0's capture starts; then none starts.)
TEST_F(EmulateTest, ACaptureThatFailsStopsTheCapturesBesideIt) {
  const RunResult r =
      run_prism({"emulate", "examples/jobs/pipeline-gpt-2.yaml", "--real-ranks", "0",
                 "--master-port", "0", "--capture-jobs", "2", "--timeout", "60", "--", "sh", "-c",
                 "[ \"$RANK\" = 1 ] && exit 3; exec sleep 120"},
                tmp_);
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_THAT(r.err, HasSubstr("capturing role 2 of 2 (stage1, 1 ranks): rank 1 runs"));
  EXPECT_THAT(r.err, HasSubstr("error: the capture of rank 1: captured rank 1 (pid "));
  EXPECT_THAT(r.err, HasSubstr("exited with code 3 before it connected to the coordinator"));
  EXPECT_THAT(r.err, Not(HasSubstr("captured rank 0")));
}

// SIGTERM to `prism emulate` while its real rank runs (and has not
// connected): the rank is stopped, the run's private directory removed, and
// prism exits with 128 + 15 and an error naming the signal (issue 26: it
// died, leaving both behind).
TEST_F(EmulateTest, SigtermStopsTheRanksAndRemovesThePrivateDirectory) {
  const std::string private_root = tmp_ + "/t";
  fs::create_directories(private_root);
  std::vector<std::string> argv_s = {testing::kPrism,
                                     "emulate",
                                     kJob,
                                     "--real-ranks",
                                     "2",
                                     "--master-port",
                                     "0",
                                     "--",
                                     "/bin/sh",
                                     "-c",
                                     "echo $$ > " + tmp_ + "/rank.pid; exec sleep 60"};
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s = {"TMPDIR=" + private_root};
  for (char** e = environ; *e != nullptr; ++e)
    if (!std::string_view(*e).starts_with("TMPDIR=")) env_s.emplace_back(*e);
  std::vector<char*> env;
  for (std::string& e : env_s) env.push_back(e.data());
  env.push_back(nullptr);
  const std::string err_path = tmp_ + "/stderr";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addchdir_np(&actions, testing::kSourceDir.c_str());
  pid_t prism = 0;
  ASSERT_EQ(posix_spawn(&prism, argv[0], &actions, nullptr, argv.data(), env.data()), 0);
  posix_spawn_file_actions_destroy(&actions);

  pid_t rank = 0;
  for (int i = 0; i < 600 && rank <= 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    rank = std::atoi(slurp(tmp_ + "/rank.pid").c_str());
  }
  ASSERT_GT(rank, 0) << "the rank did not start: " << slurp(err_path);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the rank execs sleep
  ASSERT_EQ(::kill(prism, SIGTERM), 0);
  int status = 0;
  pid_t waited = 0;
  for (int i = 0; i < 200 && waited == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    waited = ::waitpid(prism, &status, WNOHANG);
  }
  if (waited == 0) ::kill(prism, SIGKILL), ::waitpid(prism, &status, 0);
  const bool rank_alive = ::kill(rank, 0) == 0;
  if (rank_alive) ::kill(rank, SIGKILL);
  ASSERT_EQ(waited, prism) << "prism emulate did not end within 10 s of SIGTERM";
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);
  EXPECT_THAT(slurp(err_path), HasSubstr("error: interrupted by SIGTERM"));
  EXPECT_FALSE(rank_alive) << "the real rank (pid " << rank << ") outlived prism";
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(private_root)) left.push_back(e.path().string());
  EXPECT_TRUE(left.empty()) << "left behind: " << left.front();
}

}  // namespace
}  // namespace prism
