// The fault matrix of `prism emulate` with live ranks (issue 26; the table is
// in docs/emulate.md, "Faults"): each test makes one fault happen to a real
// run and checks that the run ends with one clear `error:` line naming the
// rank and what happened (or goes on, where the design drops the fault),
// that no process of the run is left, that the run's private directory is
// removed and that a report asked for is not written for a failed run.
// The cells whose error lines emulate_test.cc, emulation_test.cc and the
// runtime tests already check are checked here only for what they leave.
//
// Faults are timed by handshakes, not sleeps: a rank_player's
// --after-connect command runs once its rank is connected and before its
// first op, and raw_peer (raw_peer.cc) writes the bad bytes.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
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
using ::testing::IsEmpty;
using ::testing::MatchesRegex;
using testing::RunResult;
using testing::slurp;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const std::string kPlayer = PRISM_BINARY_DIR "/bin/rank_player";
const std::string kRawPeer = PRISM_BINARY_DIR "/bin/raw_peer";
const std::string kJob = "tests/cli/data/job_small.yaml";

class EmulateFaultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "prism_faults_test.XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    tmp_ = templ;
  }
  void TearDown() override {
    // Whatever a failed test left running is stopped, not left to the host.
    for (pid_t pid : leftover_pids()) ::kill(pid, SIGKILL);
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }

  // Starts `prism ARGS` in the source root with TMPDIR=`dir`/t (where the run
  // makes its private directory) and stdout, stderr into `dir`.
  pid_t start(const std::vector<std::string>& args, const std::string& dir) {
    fs::create_directories(dir + "/t");
    std::vector<std::string> argv_s = {testing::kPrism};
    for (const std::string& a : args) argv_s.push_back(testing::substitute_tmp(a, tmp_));
    std::vector<char*> argv;
    for (std::string& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_s = {"TMPDIR=" + dir + "/t"};
    for (char** e = environ; *e != nullptr; ++e)
      if (!std::string_view(*e).starts_with("TMPDIR=")) env_s.emplace_back(*e);
    std::vector<char*> env;
    for (std::string& e : env_s) env.push_back(e.data());
    env.push_back(nullptr);
    const std::string out = dir + "/stdout", err = dir + "/stderr";
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addchdir_np(&actions, testing::kSourceDir.c_str());
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), env.data());
    posix_spawn_file_actions_destroy(&actions);
    EXPECT_EQ(rc, 0) << "cannot start " << testing::kPrism;
    return rc == 0 ? pid : -1;
  }

  // Waits for `pid` at most `limit` (then kills it: a hang is a failure).
  RunResult finish(pid_t pid, const std::string& dir,
                   std::chrono::seconds limit = std::chrono::seconds(60)) {
    RunResult r;
    if (pid <= 0) return r;
    int status = 0;
    pid_t waited = 0;
    for (const Clock::time_point end = Clock::now() + limit; waited == 0;) {
      waited = ::waitpid(pid, &status, WNOHANG);
      if (waited == 0 && Clock::now() > end) {
        ADD_FAILURE() << "prism emulate did not end within " << limit.count() << " s";
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        break;
      }
      if (waited == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    r.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = testing::replace_all(slurp(dir + "/stdout"), tmp_, "{tmp}");
    r.err = testing::replace_all(slurp(dir + "/stderr"), tmp_, "{tmp}");
    return r;
  }

  // `prism emulate JOB --real-ranks RANKS OPTIONS -- PROGRAM`, on any free
  // store port unless OPTIONS name one.
  RunResult emulate(const std::string& ranks, const std::vector<std::string>& program,
                    const std::vector<std::string>& options = {}, const std::string& job = kJob) {
    std::vector<std::string> args = {"emulate", job, "--real-ranks", ranks};
    if (std::find(options.begin(), options.end(), "--master-port") == options.end())
      args.insert(args.end(), {"--master-port", "0"});
    args.insert(args.end(), options.begin(), options.end());
    args.push_back("--");
    args.insert(args.end(), program.begin(), program.end());
    const Clock::time_point t0 = Clock::now();
    RunResult r = finish(start(args, tmp_), tmp_);
    seconds_ = std::chrono::duration<double>(Clock::now() - t0).count();
    return r;
  }

  // Live processes whose environment mentions this test's directory: prism
  // (TMPDIR) and every process of its run, which inherit PRISM_COORDINATOR
  // and PRISM_GRAPH from its private directory in there, even those
  // reparented after prism died. Zombies have no environment to read.
  std::vector<pid_t> leftover_pids() const {
    std::vector<pid_t> pids;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/proc", ec)) {
      const std::string name = e.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      const pid_t pid = std::stoi(name);
      if (pid == ::getpid()) continue;
      std::ifstream in(e.path() / "environ", std::ios::binary);
      const std::string environ_text((std::istreambuf_iterator<char>(in)), {});
      if (environ_text.find(tmp_) != std::string::npos) pids.push_back(pid);
    }
    return pids;
  }
  std::vector<std::string> leftovers() const {
    std::vector<std::string> left;
    for (pid_t pid : leftover_pids()) {
      std::string cmd = slurp(fmt_proc(pid, "cmdline"));
      std::replace(cmd.begin(), cmd.end(), '\0', ' ');
      left.push_back(std::to_string(pid) + ": " + cmd);
    }
    return left;
  }
  static std::string fmt_proc(pid_t pid, const char* what) {
    return "/proc/" + std::to_string(pid) + "/" + what;
  }
  // What the run left in its TMPDIR (its private directory, if anything).
  std::vector<std::string> left_in_tmpdir(const std::string& dir) const {
    std::vector<std::string> left;
    for (const auto& e : fs::directory_iterator(dir + "/t")) left.push_back(e.path().string());
    return left;
  }
  // After a run: no process of it left, its private directory gone.
  void expect_clean(const std::string& dir) {
    EXPECT_THAT(leftovers(), IsEmpty());
    EXPECT_THAT(left_in_tmpdir(dir), IsEmpty());
  }
  void expect_clean() { expect_clean(tmp_); }

  std::string tmp_;
  double seconds_ = 0;
};

// A rank killed before it connects is named with its signal.
TEST_F(EmulateFaultsTest, RankKilledBeforeConnecting) {
  const RunResult r = emulate("2", {"/bin/sh", "-c", "kill -KILL $$"},
                              {"--timeout", "20", "--report", "{tmp}/r.json"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_THAT(r.err, MatchesRegex("error: real rank 2 \\(pid [0-9]+\\) killed by signal 9 "
                                  "\\(SIGKILL\\) before it connected to the coordinator\n"));
  EXPECT_LT(seconds_, 15);  // noticed at its exit, not at --timeout
  EXPECT_FALSE(fs::exists(tmp_ + "/r.json"));
  expect_clean();
}

// The cells emulate_test.cc covers for their error lines (a rank killed
// mid-collective, one that never connects, garbage on the private socket),
// checked here for what they leave: nothing running, no private directory,
// no report.
TEST_F(EmulateFaultsTest, CoveredFaultsLeaveNothingBehind) {
  struct Case {
    std::vector<std::string> program;
    std::string error;
  };
  const std::vector<Case> cases = {
      {{kPlayer, "--die-after-ops", "5"}, "connection closed without a bye; its last op: "},
      {{"sleep", "60"}, "error: live rank 0 did not connect within 1 s\n"},
      {{kPlayer, "--garbage"}, "error: a peer that never said hello: "},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.program.back());
    const RunResult r = emulate("0", c.program, {"--timeout", "1", "--report", "{tmp}/r.json"});
    EXPECT_EQ(r.exit_status, 1);
    EXPECT_THAT(r.err, HasSubstr(c.error));
    EXPECT_FALSE(fs::exists(tmp_ + "/r.json"));
    expect_clean();
  }
}

// A rank killed during the capture of a job without a model section: the
// capture of its role ends naming it, its last op and its signal. The
// program plays a graph of the job's 2 ranks and dies after 3 ops.
TEST_F(EmulateFaultsTest, RankKilledDuringCapture) {
  ASSERT_EQ(testing::run_prism({"build", kJob, "--set", "cluster.num_gpus=2", "--set",
                                "parallelism.tensor_model_parallel_size=1", "--set",
                                "parallelism.sequence_parallel=false", "-o", "{tmp}/g2.json"},
                               tmp_)
                .exit_status,
            0);
  const RunResult r =
      emulate("0", {kPlayer, "--graph", tmp_ + "/g2.json", "--die-after-ops", "3"},
              {"--timeout", "20", "--report", "{tmp}/r.json"}, "examples/jobs/pipeline-gpt-2.yaml");
  EXPECT_EQ(r.exit_status, 1);
  // Its socket is closed or reset (unread answers), as the kernel has it.
  EXPECT_THAT(r.err,
              MatchesRegex("(.*\n)*error: the capture of rank 0: captured rank 0: unix:.* "
                           "peer 0: .*; its last op: .* \\(op 2\\), entered at [0-9]+ "
                           "ns; rank 0 \\(pid [0-9]+\\) killed by signal 9 \\(SIGKILL\\)\n"));
  EXPECT_LT(seconds_, 15);
  EXPECT_FALSE(fs::exists(tmp_ + "/r.json"));
  expect_clean();
}

// A rank stopped (SIGSTOP) once connected, while the emulation waits for
// it: after --timeout of silence the run ends naming it, and the stopped
// process is killed (SIGTERM stays pending on a stopped process; SIGKILL
// follows).
TEST_F(EmulateFaultsTest, RankStoppedPastTheTimeout) {
  const RunResult r = emulate("0", {kPlayer, "--after-connect", "kill -STOP $PPID"},
                              {"--timeout", "1", "--report", "{tmp}/r.json"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_THAT(r.err, MatchesRegex("error: live rank 0 \\(pid [0-9]+\\) sent nothing for 1 s while "
                                  "the emulation waited for it \\(the process is stopped: SIGSTOP, "
                                  "job control or a debugger\\).*\n"));
  EXPECT_LT(seconds_, 15);
  EXPECT_FALSE(fs::exists(tmp_ + "/r.json"));
  expect_clean();
}

// A rank that says a proper hello, then sends bytes that are not frames.
TEST_F(EmulateFaultsTest, RankSendingGarbage) {
  const RunResult r =
      emulate("0", {kRawPeer, "rank", "garbage"}, {"--timeout", "20", "--report", "{tmp}/r.json"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_THAT(r.err, MatchesRegex("error: live rank 0 \\(pid [0-9]+\\): unix:.* peer 0: frame 1: "
                                  "bad magic 0x20544547 \\(expected 0x4d535250\\): not a PrismLLM "
                                  "peer.*\n"));
  EXPECT_THAT(r.out, HasSubstr("[rank0]: raw_peer: told: frame 1: bad magic"));
  EXPECT_FALSE(fs::exists(tmp_ + "/r.json"));
  expect_clean();
}

// A rank that hangs up in the middle of a frame.
TEST_F(EmulateFaultsTest, RankSendingATruncatedFrame) {
  const RunResult r = emulate("0", {kRawPeer, "rank", "truncated"},
                              {"--timeout", "20", "--report", "{tmp}/r.json"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_THAT(r.err, MatchesRegex("error: live rank 0 \\(pid [0-9]+\\): unix:.* peer 0: "
                                  "connection closed in the middle of a frame.*\n"));
  EXPECT_FALSE(fs::exists(tmp_ + "/r.json"));
  expect_clean();
}

// A frame header announcing 4 GiB: refused before any of it is read.
TEST_F(EmulateFaultsTest, RankSendingAnAbsurdLength) {
  const RunResult r = emulate("0", {kRawPeer, "rank", "absurd-length"},
                              {"--timeout", "20", "--report", "{tmp}/r.json"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_THAT(r.err, MatchesRegex("error: live rank 0 \\(pid [0-9]+\\): unix:.* peer 0: frame 1 "
                                  "\\(op\\): payload of 4294967295 bytes, over 1048576.*\n"));
  EXPECT_THAT(r.out, HasSubstr("[rank0]: raw_peer: told: frame 1 (op): payload of 4294967295"));
  EXPECT_FALSE(fs::exists(tmp_ + "/r.json"));
  expect_clean();
}

// A second hello as a rank that is connected (with the run's secret): that
// connection alone is refused, and the rank plays on to the end.
TEST_F(EmulateFaultsTest, RankConnectingTwice) {
  const RunResult r = emulate("0", {kPlayer, "--after-connect", kRawPeer + " twice"},
                              {"--timeout", "20", "--report", "{tmp}/r.json"});
  EXPECT_EQ(r.exit_status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("[rank0]: raw_peer: refused: rank 0 is connected already\n"));
  EXPECT_THAT(r.out, HasSubstr("[rank0]: rank_player: rank 0: done"));
  EXPECT_TRUE(fs::exists(tmp_ + "/r.json"));
  expect_clean();
}

// On --listen tcp anyone can reach the port: a stranger's garbage is
// dropped, named on stderr, and the run goes on.
TEST_F(EmulateFaultsTest, StrangersGarbageOnTcpIsDropped) {
  const RunResult r = emulate("0", {kPlayer, "--after-connect", kRawPeer + " stranger"},
                              {"--timeout", "20", "--listen", "tcp:127.0.0.1:0"});
  EXPECT_EQ(r.exit_status, 0) << r.err;
  EXPECT_THAT(r.err, MatchesRegex("(.*\n)*prism emulate: warning: dropped a connection that never "
                                  "said hello: tcp:127.0.0.1:[0-9]+ peer 1: frame 0: bad magic "
                                  "0x20544547 .*; the run goes on\n(.*\n)*"));
  EXPECT_THAT(r.out, HasSubstr("[rank0]: raw_peer: the coordinator hung up on the stranger\n"));
  EXPECT_THAT(r.out, HasSubstr("[rank0]: rank_player: rank 0: done"));
  expect_clean();
}

// `prism emulate` killed (SIGKILL: no chance to stop anything) once its
// rank connected: the rank finds the coordinator gone at its next call and
// exits by itself, within --timeout; nothing of the run is left running.
// Its private directory stays (only a process that is not killed can remove
// it) until the next run in the same TMPDIR sweeps it: its owner is gone
// (runtime/private_dir.h).
TEST_F(EmulateFaultsTest, CoordinatorKilled) {
  const pid_t prism = start({"emulate", kJob, "--real-ranks", "0", "--master-port", "0",
                             "--timeout", "2", "--", kPlayer, "--after-connect",
                             "echo $PPID > " + tmp_ +
                                 "/rank.pid; kill -KILL $(cut -d' ' -f4 "
                                 "/proc/$PPID/stat)"},
                            tmp_);
  const RunResult r = finish(prism, tmp_);
  EXPECT_EQ(r.exit_status, 128 + SIGKILL) << r.err;
  const pid_t rank = std::atoi(slurp(tmp_ + "/rank.pid").c_str());
  ASSERT_GT(rank, 0) << r.err;
  const Clock::time_point killed = Clock::now();
  std::vector<std::string> left = leftovers();
  while (!left.empty() && Clock::now() - killed < std::chrono::seconds(10)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    left = leftovers();
  }
  const double took = std::chrono::duration<double>(Clock::now() - killed).count();
  EXPECT_THAT(left, IsEmpty());
  EXPECT_LT(took, 2 + 1);  // --timeout, and a second to spare
  const std::vector<std::string> stale = left_in_tmpdir(tmp_);
  ASSERT_EQ(stale.size(), 1u);
  EXPECT_EQ(slurp(stale[0] + "/owner").rfind(std::to_string(prism) + " ", 0), 0u);
  const RunResult next = emulate("0", {kPlayer});
  EXPECT_EQ(next.exit_status, 0) << next.err;
  expect_clean();  // the stale directory swept, the new one removed at the end
}

// A client of the run's rendezvous store (MASTER_PORT) opening 40
// connections at once with malformed and absurd queries and odd keys, while
// a real rank runs: each bad client is dropped (the first 10 named, then
// one line), and the run completes.
TEST_F(EmulateFaultsTest, StoreHammeredWithBadKeys) {
  const RunResult r = emulate("0", {kPlayer, "--after-connect", kRawPeer + " store-hammer 40"},
                              {"--timeout", "20", "--report", "{tmp}/r.json"});
  EXPECT_EQ(r.exit_status, 0) << r.err;
  EXPECT_THAT(r.out,
              HasSubstr("[rank0]: raw_peer: 40 store connections, 40 closed by the store\n"));
  EXPECT_THAT(r.out, HasSubstr("[rank0]: rank_player: rank 0: done"));
  EXPECT_THAT(r.err, HasSubstr("prism emulate: warning: rendezvous store: client "));
  EXPECT_THAT(r.err,
              HasSubstr("prism emulate: warning: the rendezvous store dropped more clients"));
  EXPECT_TRUE(fs::exists(tmp_ + "/r.json"));
  expect_clean();
}

// Two runs of the same job on one host at once: private sockets and any
// free store port (--master-port 0), so neither sees the other. Each rank
// waits, once connected, for the other run's rank to be connected too, so
// the two runs surely overlap (a rank whose partner never came fails).
TEST_F(EmulateFaultsTest, TwoEmulationsAtOnce) {
  const auto hook = [&](const std::string& me, const std::string& other) {
    return "touch " + tmp_ + "/" + me + ".up; i=0; while [ ! -e " + tmp_ + "/" + other +
           ".up ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; [ -e " + tmp_ + "/" + other +
           ".up ]";
  };
  const auto args = [&](const std::string& me, const std::string& other) {
    return std::vector<std::string>{
        "emulate", kJob,    "--real-ranks",    "0,15",         "--master-port", "0",
        "--",      kPlayer, "--after-connect", hook(me, other)};
  };
  const pid_t a = start(args("a", "b"), tmp_ + "/a");
  const pid_t b = start(args("b", "a"), tmp_ + "/b");
  const RunResult ra = finish(a, tmp_ + "/a"), rb = finish(b, tmp_ + "/b");
  EXPECT_EQ(ra.exit_status, 0) << ra.err;
  EXPECT_EQ(rb.exit_status, 0) << rb.err;
  for (const RunResult* r : {&ra, &rb}) {
    EXPECT_THAT(r->out, HasSubstr("[rank0]: rank_player: rank 0: done"));
    EXPECT_THAT(r->out, HasSubstr("[rank15]: rank_player: rank 15: done"));
  }
  expect_clean(tmp_ + "/a");
  expect_clean(tmp_ + "/b");
}

// A store port that another run (here: this test) holds is one clear
// error before any rank starts.
TEST_F(EmulateFaultsTest, BusyMasterPort) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof sa;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len), 0);
  const std::string port = std::to_string(ntohs(sa.sin_port));
  const RunResult r = emulate("0", {kPlayer, "--after-connect", "touch " + tmp_ + "/started"},
                              {"--master-port", port, "--report", "{tmp}/r.json"});
  ::close(fd);
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_EQ(r.err, "error: the rendezvous store at 127.0.0.1:" + port +
                       " (MASTER_PORT; --master-port 0 picks a free one): rendezvous store: "
                       "cannot listen on 127.0.0.1:" +
                       port + ": Address already in use\n");
  EXPECT_FALSE(fs::exists(tmp_ + "/started"));
  EXPECT_FALSE(fs::exists(tmp_ + "/r.json"));
  expect_clean();
}

// --fail-node on a node of virtual ranks (docs/emulate.md, "What-if"): node
// 1 (ranks 8-15, the second pipeline stage) stops mid-iteration, so real
// rank 0 blocks for good in a pipeline transfer with rank 8. Once every
// real rank waits for what never completes, the run ends as a hang (exit
// 6): the summary and the report name the blocked ops, the waiting ranks
// (real rank 0 among them), the hang and the watchdog; rank 0 is told why
// and stopped, well before --nccl-timeout or --timeout; nothing is left.
TEST_F(EmulateFaultsTest, NodeFailureHangsTheJobAndStopsTheRealRank) {
  const RunResult r =
      emulate("0", {kPlayer},
              {"--no-kernel-db", "--fail-node", "1@3ms", "--nccl-timeout", "30s", "--timeout", "20",
               "--report", "{tmp}/r.json", "--trace", "{tmp}/t.json"});
  EXPECT_EQ(r.exit_status, 6) << r.out << r.err;
  EXPECT_LT(seconds_, 15);
  EXPECT_THAT(r.out, HasSubstr("outcome:            hung: node 1 failed (the iteration did not "
                               "complete)\n"));
  EXPECT_THAT(r.out, HasSubstr("what-if:            --fail-node 1@3ms: the replay without real "
                               "ranks does not complete, vs "));
  EXPECT_THAT(r.out, HasSubstr("node failure:       node 1 (ranks 8-15) stops at 3.000 ms\n"));
  EXPECT_THAT(r.out, MatchesRegex("(.*\n)*                    the job hangs: no op completes "
                                  "after [0-9.]+ ms; [0-9]+ communication ops never complete:\n"
                                  "(.*\n)*.* rank 8 .*; rank 0 waits since [0-9.]+ ms\n(.*\n)*"));
  EXPECT_THAT(r.out, MatchesRegex("(.*\n)*watchdog:           --nccl-timeout 30 s: rank [0-9]+'s "
                                  "fires at 30.00[0-9] s .*\n(.*\n)*"));
  EXPECT_THAT(r.out, MatchesRegex("(.*\n)*0 +[0-9]+ +[0-9]+ +0.00[0-9]+ s +aborted +1\n(.*\n)*"));
  // What the rank was told (its player prints it on stderr).
  EXPECT_THAT(r.err, MatchesRegex("(.*\n)*\\[rank0\\]: rank_player: rank 0: wait: .*the "
                                  "coordinator: the emulation ended: node 1 failed at 3.000000 ms "
                                  "and the job hangs \\(no op completes after [0-9.]+ ms\\); live "
                                  "rank 0 waits for .* from rank 8 .*; its NCCL watchdog "
                                  "\\(--nccl-timeout 30 s\\) would abort it at 30.00[0-9]+ "
                                  "s\n(.*\n)*"));
  EXPECT_THAT(r.err, MatchesRegex("(.*\n)*prism emulate: real rank 0 \\(pid [0-9]+\\), told that "
                                  "the job hangs, exited with code 1\n(.*\n)*"));

  const nlohmann::json report = nlohmann::json::parse(slurp(tmp_ + "/r.json"));
  EXPECT_EQ(report["outcome"], "node_failure");
  EXPECT_TRUE(report["iteration_time_s"].is_null());
  EXPECT_TRUE(report["predicted_iteration_time_s"].is_null());  // the prediction hangs too
  EXPECT_TRUE(report["real_ranks"][0]["aborted"].get<bool>());
  EXPECT_EQ(report["real_ranks"][0]["exit_code"], 1);
  const nlohmann::json& f = report["node_failure"];
  EXPECT_EQ(f["node"], 1);
  EXPECT_EQ(f["ranks"], nlohmann::json({8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(f["fail_time_s"], 0.003);
  EXPECT_TRUE(f["hung"].get<bool>());
  EXPECT_EQ(f["nccl_timeout_s"], 30.0);
  // The watchdog: the earliest arrival among the blocked ops, + 30 s;
  // real rank 0 waits in one of them, on rank 8.
  double first = 1e9;
  bool rank0_waits = false;
  for (const nlohmann::json& b : f["blocked"]) {
    first = std::min(first, b["since_s"].get<double>());
    for (const nlohmann::json& w : b["waiting_ranks"])
      if (w == 0) rank0_waits = b["op"].get<std::string>().find("rank 8") != std::string::npos;
  }
  EXPECT_TRUE(rank0_waits) << f.dump();
  EXPECT_DOUBLE_EQ(f["watchdog_time_s"].get<double>(), first + 30);
  EXPECT_GT(f["hang_time_s"].get<double>(), 0);
  EXPECT_THAT(slurp(tmp_ + "/t.json"), HasSubstr("node 1 fails"));
  expect_clean();
}

}  // namespace
}  // namespace prism
