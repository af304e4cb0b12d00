// Runs nccl_program (a separate process: the drop-in keeps one client per
// process and says goodbye at exit) in one of its modes, with the
// environment `prism emulate` would give it, its output captured in a file.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace prism::nccl_test {

inline std::filesystem::path scratch_dir() {
  const auto dir =
      std::filesystem::temp_directory_path() / ("prism-nccl-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

class Program {
 public:
  // `env` is added to this process's environment, from which PrismLLM's
  // variables are removed first.
  Program(const std::string& mode, const std::map<std::string, std::string>& env) {
    static int n = 0;
    output_path_ = scratch_dir() / ("program" + std::to_string(n++) + ".out");
    std::vector<std::string> vars;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string v = *e;
      const std::string name = v.substr(0, v.find('='));
      if (name.rfind("PRISM_", 0) == 0 || name == "RANK" || name == "WORLD_SIZE" ||
          name == "LOCAL_RANK" || env.contains(name))
        continue;
      vars.push_back(v);
    }
    for (const auto& [k, v] : env) vars.push_back(k + "=" + v);
    std::vector<char*> envp, argv;
    for (std::string& v : vars) envp.push_back(v.data());
    envp.push_back(nullptr);
    std::string program = PRISM_NCCL_PROGRAM, arg = mode;
    argv = {program.data(), arg.data(), nullptr};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, output_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    spawned_ = posix_spawn(&pid_, program.c_str(), &fa, nullptr, argv.data(), envp.data()) == 0;
    posix_spawn_file_actions_destroy(&fa);
  }
  ~Program() {
    if (spawned_ && !status_) {
      ::kill(pid_, SIGKILL);
      wait();
    }
  }

  // The exit code (128 + signal when killed) once the program has ended.
  std::optional<int> poll() {
    if (!spawned_) return 127;
    if (status_) return status_;
    int st = 0;
    if (::waitpid(pid_, &st, WNOHANG) != pid_) return std::nullopt;
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return status_;
  }
  // Waits up to `limit`, then kills it.
  int wait(std::chrono::milliseconds limit = std::chrono::seconds(20)) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!poll() && std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    if (!poll()) {
      ::kill(pid_, SIGKILL);
      int st = 0;
      ::waitpid(pid_, &st, 0);
      status_ = 128 + SIGKILL;
    }
    return *status_;
  }
  std::string output() const {
    std::ifstream in(output_path_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  pid_t pid_ = 0;
  bool spawned_ = false;
  std::optional<int> status_;
  std::filesystem::path output_path_;
};

}  // namespace prism::nccl_test
