#include "runtime/launcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include <fmt/format.h>

namespace prism::runtime {
namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using Clock = std::chrono::steady_clock;

// Generous bounds: these only catch hangs, not slowness on a loaded machine.
constexpr auto kLong = 10s;

std::vector<std::string> sh(const std::string& script) {
  return {"/bin/sh", "-c", script};
}

// A sink that keeps each rank's stdout and stderr lines apart.
class Collector {
 public:
  OutputSink sink() {
    return [this](int rank, bool is_stderr, std::string_view line) {
      std::lock_guard lock(mu_);
      lines_[{rank, is_stderr}].emplace_back(line);
      cv_.notify_all();
    };
  }
  std::vector<std::string> lines(int rank, bool is_stderr) {
    std::lock_guard lock(mu_);
    return lines_[{rank, is_stderr}];
  }
  // The first stdout line of `rank`, waiting for it.
  std::optional<std::string> first_line(int rank) {
    std::unique_lock lock(mu_);
    auto& v = lines_[{rank, false}];
    if (!cv_.wait_for(lock, kLong, [&] { return !v.empty(); })) return std::nullopt;
    return v.front();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<int, bool>, std::vector<std::string>> lines_;
};

// Blocks callers of wait() until open().
class Gate {
 public:
  struct OpenOnExit {
    Gate& gate;
    ~OpenOnExit() { gate.open(); }
  };
  void wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return open_; });
  }
  void open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

// Alive: /proc has it and it is not a zombie (an orphan's reaper may be slow).
bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  std::size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] != 'Z' &&
         text[paren + 2] != 'X';
}

bool dies_soon(pid_t pid) {
  for (auto end = Clock::now() + kLong; Clock::now() < end; std::this_thread::sleep_for(5ms)) {
    if (!alive(pid)) return true;
  }
  return false;
}

// A child stopped with SIGSTOP reads as stopped, running again after
// SIGCONT; this process is not stopped, and a pid that is gone is not.
TEST(LauncherTest, ProcessStoppedReadsTheProcessState) {
  EXPECT_FALSE(process_stopped(getpid()));
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  ASSERT_EQ(kill(child, SIGSTOP), 0);
  bool stopped = false;
  for (int i = 0; i < 200 && !(stopped = process_stopped(child)); ++i) usleep(5000);
  EXPECT_TRUE(stopped);
  ASSERT_EQ(kill(child, SIGCONT), 0);
  bool running = false;
  for (int i = 0; i < 200 && !(running = !process_stopped(child)); ++i) usleep(5000);
  EXPECT_TRUE(running);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_FALSE(process_stopped(child));
}

TEST(LauncherTest, ForwardsLinesPerRankAndStream) {
  Collector out;
  Launcher launcher(out.sink());
  for (int rank : {0, 5}) {
    const std::string r = std::to_string(rank);
    ASSERT_TRUE(
        launcher.start(rank, sh("echo out" + r + "; echo err" + r + " >&2; printf tail" + r), {})
            .is_ok());
  }
  std::vector<RankExit> exits = launcher.wait_all(kLong);
  ASSERT_EQ(exits.size(), 2u);
  EXPECT_EQ(exits[0].rank, 0);
  EXPECT_EQ(exits[1].rank, 5);
  for (const RankExit& e : exits) EXPECT_EQ(e.describe(), "exited with code 0");
  // wait_all returns after each child's pipes reached EOF.
  EXPECT_THAT(out.lines(0, false), ElementsAre("out0", "tail0"));
  EXPECT_THAT(out.lines(0, true), ElementsAre("err0"));
  EXPECT_THAT(out.lines(5, false), ElementsAre("out5", "tail5"));
  EXPECT_THAT(out.lines(5, true), ElementsAre("err5"));
}

TEST(LauncherTest, NothingLostAfterAQuickExit) {
  Collector out;
  Launcher launcher(out.sink());
  ASSERT_TRUE(launcher.start(2, {"seq", "1", "10000"}, {}).is_ok());
  EXPECT_EQ(launcher.wait_all(kLong).at(0).describe(), "exited with code 0");
  std::vector<std::string> lines = out.lines(2, false);
  ASSERT_EQ(lines.size(), 10000u);
  for (int i = 0; i < 10000; ++i) ASSERT_EQ(lines[i], std::to_string(i + 1));
}

TEST(LauncherTest, StdioSinkPrefixesWholeLines) {
  std::FILE* out = std::tmpfile();
  std::FILE* err = std::tmpfile();
  ASSERT_TRUE(out && err);
  {
    Launcher launcher(stdio_sink(out, err));
    // Two ranks writing at once: each line must still come out whole.
    for (int rank : {0, 1}) {
      auto argv = sh("i=0; while [ $i -lt 2000 ]; do echo \"line $i of rank " +
                     std::to_string(rank) + " padding padding padding\"; i=$((i+1)); done; " +
                     "echo oops >&2; printf 'no newline' >&2");
      ASSERT_TRUE(launcher.start(rank, argv, {}).is_ok());
    }
    launcher.wait_all(kLong);
  }
  auto read_all = [](std::FILE* f) {
    std::rewind(f);
    std::string text;
    for (int c; (c = std::fgetc(f)) != EOF;) text.push_back(static_cast<char>(c));
    std::fclose(f);
    return text;
  };
  std::istringstream lines(read_all(out));
  int next[2] = {0, 0};
  for (std::string line; std::getline(lines, line);) {
    int rank = line.starts_with("[rank1]: ") ? 1 : 0;
    ASSERT_EQ(line, fmt::format("[rank{}]: line {} of rank {} padding padding padding", rank,
                                next[rank], rank));
    ++next[rank];
  }
  EXPECT_EQ(next[0], 2000);
  EXPECT_EQ(next[1], 2000);
  std::string errs = read_all(err);
  EXPECT_THAT(errs, ::testing::HasSubstr("[rank0]: oops\n"));
  EXPECT_THAT(errs, ::testing::HasSubstr("[rank1]: no newline\n"));
  EXPECT_EQ(errs.size(), 2 * (sizeof("[rank0]: oops\n[rank0]: no newline\n") - 1));
}

TEST(LauncherTest, ChildSeesGivenEnvironmentAndNoStdin) {
  ASSERT_EQ(setenv("PRISM_LAUNCHER_TEST_A", "parent", 1), 0);
  ASSERT_EQ(setenv("PRISM_LAUNCHER_TEST_B", "inherited", 1), 0);
  Collector out;
  Launcher launcher(out.sink());
  Env env = {{"PRISM_LAUNCHER_TEST_A", "child"}, {"RANK", "3"}, {"RANK", "4"}};
  // `cat` would block forever on an inherited terminal; /dev/null ends it.
  auto argv = sh("cat; echo \"$PRISM_LAUNCHER_TEST_A $PRISM_LAUNCHER_TEST_B $RANK\"");
  ASSERT_TRUE(launcher.start(3, argv, env).is_ok());
  EXPECT_FALSE(launcher.wait_all(kLong).at(0).running());
  EXPECT_THAT(out.lines(3, false), ElementsAre("child inherited 4"));
  unsetenv("PRISM_LAUNCHER_TEST_A");
  unsetenv("PRISM_LAUNCHER_TEST_B");
}

TEST(LauncherTest, ReportsExitCodesAndSignals) {
  Collector out;
  Launcher launcher(out.sink());
  ASSERT_TRUE(launcher.start(1, sh("kill -9 $$"), {}).is_ok());
  ASSERT_TRUE(launcher.start(0, sh("exit 3"), {}).is_ok());
  std::vector<RankExit> exits = launcher.wait_all(kLong);
  ASSERT_EQ(exits.size(), 2u);
  EXPECT_EQ(exits[0].how, RankExit::How::kExited);
  EXPECT_EQ(exits[0].code, 3);
  EXPECT_EQ(exits[0].describe(), "exited with code 3");
  EXPECT_EQ(exits[1].how, RankExit::How::kSignaled);
  EXPECT_EQ(exits[1].code, SIGKILL);
  EXPECT_EQ(exits[1].describe(), "killed by signal 9 (SIGKILL)");
  EXPECT_EQ(exits[1].pid, launcher.pid(1));
  EXPECT_TRUE(launcher.poll_exits().empty());  // wait_all reported them
}

TEST(LauncherTest, PollExitsReportsEachExitOnce) {
  Collector out;
  Launcher launcher(out.sink());
  ASSERT_TRUE(launcher.start(0, sh("exit 1"), {}).is_ok());
  ASSERT_TRUE(launcher.start(1, {"sleep", "100"}, {}).is_ok());
  std::vector<RankExit> exits;
  for (auto end = Clock::now() + kLong; exits.empty() && Clock::now() < end;) {
    exits = launcher.poll_exits();
    std::this_thread::sleep_for(2ms);
  }
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].rank, 0);
  EXPECT_EQ(exits[0].describe(), "exited with code 1");
  EXPECT_TRUE(launcher.poll_exits().empty());
  EXPECT_EQ(launcher.running(), 1);
  EXPECT_EQ(launcher.num_started(), 2);
  EXPECT_EQ(launcher.pid(7), -1);
}

TEST(LauncherTest, ExitIsReportedAfterTheOutput) {
  // The sink holds the forwarder on the first line until the child has ended,
  // so the rest of its output is still in the pipe when it is reaped.
  Collector out;
  Gate gate;
  OutputSink collect = out.sink();
  Launcher launcher([&](int rank, bool is_stderr, std::string_view line) {
    gate.wait();
    collect(rank, is_stderr, line);
  });
  Gate::OpenOnExit guard{gate};  // before ~Launcher, which needs the forwarder back
  // 10000 lines, 49 KB: they fit in the pipe, so the child can end.
  ASSERT_TRUE(launcher.start(0, sh("seq 1 10000 >&2; exit 1"), {}).is_ok());
  for (auto end = Clock::now() + kLong; launcher.running() > 0 && Clock::now() < end;) {
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_EQ(launcher.running(), 0);
  EXPECT_TRUE(launcher.poll_exits().empty());  // reaped, but its output is not all out
  gate.open();
  std::vector<RankExit> exits;
  for (auto end = Clock::now() + kLong; exits.empty() && Clock::now() < end;) {
    exits = launcher.poll_exits();
  }
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].describe(), "exited with code 1");
  EXPECT_EQ(out.lines(0, true).size(), 10000u);  // the whole "traceback" came first
}

TEST(LauncherTest, StartFailsForAProgramThatCannotRun) {
  Collector out;
  Launcher launcher(out.sink());
  Result<pid_t> missing = launcher.start(3, {"prism-no-such-program"}, {});
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(),
            "rank 3: cannot run 'prism-no-such-program': No such file or directory");

  char path[] = "/tmp/prism_launcher_test_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  Result<pid_t> not_executable = launcher.start(4, {path}, {});
  unlink(path);
  ASSERT_FALSE(not_executable.is_ok());
  EXPECT_EQ(not_executable.status().message(),
            fmt::format("rank 4: cannot run '{}': Permission denied", path));

  EXPECT_EQ(launcher.num_started(), 0);
  EXPECT_TRUE(launcher.start(3, sh("exit 0"), {}).is_ok());  // the rank is still free
}

TEST(LauncherTest, RejectsBadRequests) {
  Collector out;
  Launcher launcher(out.sink());
  EXPECT_EQ(launcher.start(0, {}, {}).status().message(), "rank 0: empty command");
  EXPECT_EQ(launcher.start(0, sh("true"), {{"A=B", "c"}}).status().message(),
            "rank 0: bad environment variable name 'A=B'");
  ASSERT_TRUE(launcher.start(0, sh("true"), {}).is_ok());
  EXPECT_EQ(launcher.start(0, sh("true"), {}).status().message(), "rank 0: already started");
}

TEST(LauncherTest, TerminateAllStopsTheProcessGroup) {
  Collector out;
  Launcher launcher(out.sink());
  ASSERT_TRUE(launcher.start(0, sh("sleep 100 & echo $!; wait"), {}).is_ok());
  std::optional<std::string> grandchild = out.first_line(0);
  ASSERT_TRUE(grandchild.has_value());
  const pid_t pid = launcher.pid(0);

  auto t0 = Clock::now();
  std::vector<RankExit> exits = launcher.terminate_all(kLong);
  EXPECT_LT(Clock::now() - t0, kLong / 2);  // SIGTERM sufficed: no wait for the grace
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].describe(), "killed by signal 15 (SIGTERM)");
  EXPECT_FALSE(alive(pid));
  EXPECT_TRUE(dies_soon(std::stoi(*grandchild)));
  EXPECT_EQ(launcher.running(), 0);
}

TEST(LauncherTest, TerminateAllKillsWhatIgnoresSigterm) {
  Collector out;
  Launcher launcher(out.sink());
  ASSERT_TRUE(launcher.start(0, sh("trap '' TERM; echo ready; sleep 100; exit 0"), {}).is_ok());
  ASSERT_EQ(out.first_line(0), "ready");
  std::vector<RankExit> exits = launcher.terminate_all(50ms);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].describe(), "killed by signal 9 (SIGKILL)");
}

// A rank stopped by SIGSTOP gets the SIGTERM too (it is continued), instead
// of holding it pending until the SIGKILL after the grace.
TEST(LauncherTest, TerminateAllEndsAStoppedRankWithSigterm) {
  Collector out;
  Launcher launcher(out.sink());
  ASSERT_TRUE(launcher.start(0, sh("echo stopping; kill -STOP $$; sleep 100"), {}).is_ok());
  ASSERT_EQ(out.first_line(0), "stopping");
  const pid_t pid = launcher.pid(0);
  // The shell stops itself right after the line: wait until it has.
  bool stopped = false;
  for (auto end = Clock::now() + kLong; !stopped && Clock::now() < end;) {
    std::ifstream stat(fmt::format("/proc/{}/stat", pid));
    std::string field;
    stat >> field >> field >> field;  // pid (comm) state
    stopped = field == "T";
    if (!stopped) std::this_thread::sleep_for(5ms);
  }
  ASSERT_TRUE(stopped);
  auto t0 = Clock::now();
  std::vector<RankExit> exits = launcher.terminate_all(kLong);
  EXPECT_LT(Clock::now() - t0, kLong / 2);  // no wait for the grace
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].describe(), "killed by signal 15 (SIGTERM)");
}

TEST(LauncherTest, DestructorStopsWhatIsLeft) {
  Collector out;
  pid_t pid = -1;
  std::optional<std::string> grandchild;
  {
    Launcher launcher(out.sink());
    ASSERT_TRUE(launcher.start(0, sh("sleep 100 & echo $!; wait"), {}).is_ok());
    pid = launcher.pid(0);
    grandchild = out.first_line(0);
    ASSERT_TRUE(grandchild.has_value());
  }
  EXPECT_FALSE(alive(pid));
  EXPECT_TRUE(dies_soon(std::stoi(*grandchild)));
}

TEST(LauncherTest, DestructorStopsWhatAnEndedRankLeftBehind) {
  Collector out;
  std::optional<std::string> orphan;
  auto t0 = Clock::now();
  {
    Launcher launcher(out.sink());
    // The shell ends at once; its background sleep keeps the pipes open.
    ASSERT_TRUE(launcher.start(0, sh("sleep 100 & echo $!"), {}).is_ok());
    orphan = out.first_line(0);
    ASSERT_TRUE(orphan.has_value());
  }
  EXPECT_TRUE(dies_soon(std::stoi(*orphan)));
  EXPECT_LT(Clock::now() - t0, kLong / 2);  // no wait for the SIGKILL grace
}

TEST(LauncherTest, WaitAllTimesOutOnARunningChild) {
  Collector out;
  Launcher launcher(out.sink());
  ASSERT_TRUE(launcher.start(0, {"sleep", "100"}, {}).is_ok());
  auto t0 = Clock::now();
  std::vector<RankExit> exits = launcher.wait_all(50ms);
  EXPECT_LT(Clock::now() - t0, kLong);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_TRUE(exits[0].running());
  EXPECT_EQ(exits[0].describe(), "running");
  EXPECT_EQ(launcher.running(), 1);
}

TEST(LauncherTest, DescribesEveryEnding) {
  RankExit e;
  EXPECT_EQ(e.describe(), "running");
  e.how = RankExit::How::kSignaled;
  e.code = SIGSEGV;
  e.core_dumped = true;
  EXPECT_EQ(e.describe(), "killed by signal 11 (SIGSEGV), core dumped");
  e.how = RankExit::How::kUnknown;
  EXPECT_EQ(e.describe(), "ended (exit status unknown)");
}

}  // namespace
}  // namespace prism::runtime
