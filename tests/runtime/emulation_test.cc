// runtime::Emulation without the `prism` binary: real rank_player processes
// (examples/rank_player) against the coordinator, on the small GPT job of the
// CLI's golden tests (16 ranks, a 10 ms iteration), and its rejections.
// Emulated times depend on this machine, so only their structure is checked
// (tests/cli/emulate_test.cc runs the same through the CLI, with loose bounds).
#include "runtime/emulation.h"

#include <fcntl.h>
#include <stdlib.h>

#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/launcher.h"
#include "util/file.h"

namespace prism::runtime {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

const std::string kPlayer = PRISM_BINARY_DIR "/bin/rank_player";
const std::string kJob = PRISM_SOURCE_DIR "/tests/cli/data/job_small.yaml";

class EmulationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "prism_emulation_test.XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    tmp_ = templ;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }
  // The job's ranks `ranks` run rank_player; any free port for the store.
  static EmulationOptions options(const std::string& ranks) {
    EmulationOptions o;
    o.job.job_path = kJob;
    o.real_ranks = ranks;
    o.program = {kPlayer};
    o.master_port = 0;
    o.timeout_s = 60;
    return o;
  }
  std::string tmp_;
};

TEST_F(EmulationTest, RealRanksGetTheReplayedTimeBesideThePrediction) {
  EmulationOptions o = options("0,15");
  o.report_path = tmp_ + "/r.json";
  o.trace_path = tmp_ + "/t.json";
  Emulation emulation(o);
  Result<EmulationResult> r = emulation.run();
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  const EmulateSummary& s = r.value().summary;
  EXPECT_FALSE(r.value().real_rank_failed);
  EXPECT_EQ(s.job, "gpt-small");
  EXPECT_EQ(s.world_size, 16);
  EXPECT_EQ(s.program, kPlayer);
  EXPECT_TRUE(s.out_of_memory.empty());
  ASSERT_EQ(s.emulated.live.size(), 2u);
  ASSERT_EQ(s.predicted.size(), 2u);
  EXPECT_GT(s.predicted_iteration_time.seconds(), 0.009);
  EXPECT_GT(s.emulated.replay.iteration_time.seconds(), 0.009);
  for (std::size_t i = 0; i < 2; ++i) {
    const LiveRankReport& live = s.emulated.live[i];
    EXPECT_EQ(live.rank, i == 0 ? 0 : 15);
    EXPECT_EQ(live.exit_code, 0);
    EXPECT_EQ(live.ops, live.graph_ops);
    EXPECT_EQ(live.compute + live.wait, live.iteration_time);
    // Its time, not bounded here: tests/cli/emulate_test.cc checks it loosely.
    EXPECT_GT(live.iteration_time.seconds(), 0);
    EXPECT_GT(s.predicted[i].seconds(), 0.009);
  }
  EXPECT_EQ(s.emulated.live[0].ops, 99);  // its communication ops in the graph
  EXPECT_FALSE(s.emulated.computed.empty());

  ASSERT_TRUE(emulation.write_outputs(r.value()).is_ok());
  Result<std::string> report = read_file(tmp_ + "/r.json");
  ASSERT_TRUE(report.is_ok());
  EXPECT_EQ(report.value(), format_emulate_json(s));
  Result<std::string> trace = read_file(tmp_ + "/t.json");
  ASSERT_TRUE(trace.is_ok());
  EXPECT_THAT(trace.value(), HasSubstr(R"("args":{"measured":true})"));
}

TEST_F(EmulationTest, RealRanksOutsideTheJobAreRefused) {
  Emulation emulation(options("3,16"));
  Result<EmulationResult> r = emulation.run();
  ASSERT_FALSE(r.is_ok());
  EXPECT_THAT(r.status().message(), HasSubstr("--real-ranks"));
}

TEST_F(EmulationTest, AJobWithAModelCapturesNothing) {
  EmulationOptions o = options("0");
  o.slices_dir = tmp_ + "/s";
  Emulation emulation(o);
  Result<EmulationResult> r = emulation.run();
  ASSERT_FALSE(r.is_ok());
  EXPECT_THAT(r.status().message(), HasSubstr("--slices " + tmp_ +
                                              "/s: job 'gpt-small' has a model section, so its "
                                              "graph is the model's and no rank is captured"));
  EXPECT_FALSE(fs::exists(tmp_ + "/s"));
}

TEST_F(EmulationTest, AGraphOfAnotherWorldIsRefused) {
  EmulationOptions o = options("0");
  o.graph_path = PRISM_SOURCE_DIR "/examples/graphs/gpt_tp2_pp2_dp2.json";
  Emulation emulation(o);
  Result<EmulationResult> r = emulation.run();
  ASSERT_FALSE(r.is_ok());
  EXPECT_THAT(r.status().message(), HasSubstr("a graph of 8 ranks; job 'gpt-small' has 16"));
}

TEST_F(EmulationTest, ARankThatExitsBeforeConnectingEndsTheRun) {
  EmulationOptions o = options("2");
  o.program = {"/bin/sh", "-c", "exit 7"};
  Emulation emulation(o);
  Result<EmulationResult> r = emulation.run();
  ASSERT_FALSE(r.is_ok());
  EXPECT_THAT(r.status().message(),
              ::testing::MatchesRegex("real rank 2 \\(pid [0-9]+\\) exited with code 7 before it "
                                      "connected to the coordinator.*"));
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
}

// A coordinator listening off the loopback is reachable from other hosts:
// the run says so on stderr (issue 26: it bound 0.0.0.0 without a word).
TEST_F(EmulationTest, ListeningOffTheLoopbackIsWarnedAbout) {
  for (const std::string listen : {"tcp:0.0.0.0:0", "tcp:127.0.0.1:0"}) {
    EmulationOptions o = options("2");
    o.program = {"/bin/sh", "-c", "exit 7"};  // ends the run at once
    o.listen = listen;
    Emulation emulation(o);
    ::testing::internal::CaptureStderr();
    Result<EmulationResult> r = emulation.run();
    const std::string err = ::testing::internal::GetCapturedStderr();
    ASSERT_FALSE(r.is_ok());
    EXPECT_THAT(r.status().message(), HasSubstr("exited with code 7"));
    const std::string warning =
        "prism emulate: warning: --listen tcp:0.0.0.0:0: the coordinator is reachable from "
        "other hosts";
    if (listen == "tcp:0.0.0.0:0") {
      EXPECT_THAT(err, HasSubstr(warning));
    } else {
      EXPECT_THAT(err, ::testing::Not(HasSubstr("reachable from other hosts")));
    }
  }
}

// Its goodbye said exit 0; its process then exited 3. The report gives the
// process's exit (it once said 0).
TEST_F(EmulationTest, ARankThatFailsAfterItsGoodbyeIsReportedWithItsProcessExit) {
  EmulationOptions o = options("1");
  o.program = {"/bin/sh", "-c", "\"$0\"; exit 3", kPlayer};
  o.report_path = tmp_ + "/r.json";
  Emulation emulation(o);
  Result<EmulationResult> r = emulation.run();
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_TRUE(r.value().real_rank_failed);
  ASSERT_EQ(r.value().summary.emulated.live.size(), 1u);
  EXPECT_EQ(r.value().summary.emulated.live[0].exit_code, 3);
  ASSERT_TRUE(emulation.write_outputs(r.value()).is_ok());
  Result<std::string> report = read_file(tmp_ + "/r.json");
  ASSERT_TRUE(report.is_ok());
  EXPECT_THAT(report.value(), HasSubstr("\"exit_code\": 3"));
}

// The descriptors this process would pass to any child: open and not
// close-on-exec (0, 1, 2 and whatever the test runner left inheritable).
std::set<int> inheritable_fds() {
  std::set<int> fds;
  for (const auto& e : fs::directory_iterator("/proc/self/fd")) {
    const int fd = std::stoi(e.path().filename().string());
    const int flags = ::fcntl(fd, F_GETFD);
    if (flags >= 0 && (flags & FD_CLOEXEC) == 0) fds.insert(fd);
  }
  return fds;
}

// Each real rank lists its shell's descriptors (on its stdout, which the
// launcher forwards with a "[rankN]: " prefix), then runs rank_player: it
// holds none of the coordinator's, the store's or the other rank's sockets
// and pipes (issue 26: the coordinator's listening socket was inherited).
TEST_F(EmulationTest, RealRanksInheritNoneOfTheCoordinatorsDescriptors) {
  EmulationOptions o = options("0,15");
  o.program = {"/bin/sh", "-c", "ls -l /proc/$$/fd; exec \"$0\"", kPlayer};
  Emulation emulation(o);
  ::testing::internal::CaptureStdout();  // keeps stdout on a descriptor it opens
  const std::set<int> ours = inheritable_fds();
  Result<EmulationResult> r = emulation.run();
  const std::string out = ::testing::internal::GetCapturedStdout();
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  std::map<int, int> seen;  // rank -> descriptors listed
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    const std::size_t arrow = line.find(" -> ");
    if (!line.starts_with("[rank") || arrow == std::string::npos) continue;
    const int rank = std::stoi(line.substr(5));
    const std::size_t name = line.rfind(' ', arrow - 1) + 1;
    const int fd = std::stoi(line.substr(name, arrow - name));
    ++seen[rank];
    EXPECT_TRUE(fd <= 2 || ours.contains(fd)) << "it holds: " << line;
  }
  EXPECT_GE(seen[0], 3) << out;
  EXPECT_GE(seen[15], 3) << out;
}

// --external-ranks: nothing is started here. The test plays the other hosts'
// launcher: it reads --rank-env and starts rank_player as ranks 0 and 3.
TEST_F(EmulationTest, ExternalRanksConnectWithTheEnvironmentOfRankEnv) {
  EmulationOptions o = options("0,3");
  o.program.clear();
  o.external_ranks = true;
  o.listen = "tcp:127.0.0.1:0";
  o.external_env_path = tmp_ + "/rank.env";
  o.timeout_s = 30;
  Result<EmulationResult> r = Status::internal("not run");
  std::thread coordinator([&] { r = Emulation(o).run(); });
  for (int i = 0; i < 600 && !fs::exists(o.external_env_path); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(fs::exists(o.external_env_path));
  EXPECT_EQ(fs::status(o.external_env_path).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);  // it holds the secret
  Result<std::string> text = read_file(o.external_env_path);
  ASSERT_TRUE(text.is_ok());
  Env env;
  std::istringstream lines(text.value());
  for (std::string line; std::getline(lines, line);)
    env.emplace_back(line.substr(0, line.find('=')), line.substr(line.find('=') + 1));
  std::map<std::string, std::string> vars(env.begin(), env.end());
  EXPECT_EQ(vars.at("WORLD_SIZE"), "16");
  EXPECT_EQ(vars.at("MASTER_ADDR"), "127.0.0.1");
  EXPECT_EQ(vars.at("PRISM_SECRET").size(), 32u);
  EXPECT_THAT(vars.at("PRISM_COORDINATOR"), HasSubstr("tcp:127.0.0.1:"));
  EXPECT_FALSE(vars.contains("RANK"));  // each rank's own, from its launcher
  Launcher launcher(stdio_sink(stdout, stderr));
  for (Rank rank : {0, 3}) {
    Env e = env;
    e.emplace_back("RANK", std::to_string(rank));
    e.emplace_back("LOCAL_RANK", std::to_string(rank));
    ASSERT_TRUE(launcher.start(rank, {kPlayer}, e).is_ok());
  }
  coordinator.join();
  for (const RankExit& e : launcher.wait_all(std::chrono::seconds(30), [] { return false; }))
    EXPECT_EQ(e.code, 0) << e.describe();
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  const EmulateSummary& s = r.value().summary;
  ASSERT_EQ(s.emulated.live.size(), 2u);
  EXPECT_EQ(s.emulated.live[1].rank, 3);
  EXPECT_GT(s.emulated.live[1].ops, 0);
  EXPECT_EQ(s.program, "started elsewhere (--external-ranks)");
  EXPECT_FALSE(s.oversubscribed());  // the ranks are not this host's
}

TEST_F(EmulationTest, ExternalRanksThatNeverComeAreNamed) {
  EmulationOptions o = options("0,3,5");
  o.program.clear();
  o.external_ranks = true;
  o.listen = "tcp:127.0.0.1:0";
  o.external_env_path = tmp_ + "/rank.env";
  o.timeout_s = 0.5;
  Result<EmulationResult> r = Emulation(o).run();
  ASSERT_FALSE(r.is_ok());
  EXPECT_THAT(r.status().message(), HasSubstr("live ranks 0, 3, 5 did not connect within 0.5 s"));
}

TEST_F(EmulationTest, ExternalRanksNeedWhatTheyCannotDoWithout) {
  const auto refused = [&](EmulationOptions o, const std::string& why) {
    Result<EmulationResult> r = Emulation(o).run();
    ASSERT_FALSE(r.is_ok()) << why;
    EXPECT_THAT(r.status().message(), HasSubstr(why));
  };
  EmulationOptions o = options("0");
  o.external_ranks = true;
  o.listen = "tcp:127.0.0.1:0";
  o.external_env_path = tmp_ + "/rank.env";
  refused(o, "--external-ranks starts no real rank here: drop the PROGRAM");
  o.program.clear();
  EmulationOptions unix_socket = o;
  unix_socket.listen = "unix:" + tmp_ + "/c.sock";
  refused(unix_socket, "--external-ranks needs --listen tcp:HOST:PORT");
  EmulationOptions no_env = o;
  no_env.external_env_path.clear();
  refused(no_env, "--external-ranks needs --rank-env FILE");
  EmulationOptions captured = o;
  captured.job.job_path = PRISM_SOURCE_DIR "/examples/jobs/ddp-gpt-64.yaml";
  refused(captured, "describes a program, whose graph comes from capturing it here; give --graph");
  EmulationOptions no_program = options("0");
  no_program.program.clear();
  refused(no_program, "no PROGRAM to run for the real ranks");
  EmulationOptions stray_env = options("0");
  stray_env.external_env_path = tmp_ + "/rank.env";
  refused(stray_env, "--rank-env is for --external-ranks");
}

}  // namespace
}  // namespace prism::runtime
