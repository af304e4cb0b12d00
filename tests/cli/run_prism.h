// Runs the built `prism` binary for the CLI tests: stdin from /dev/null,
// stdout and stderr into files of a temporary directory, the source root as
// working directory; "{tmp}" in arguments and output stands for that
// directory.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "util/file.h"

extern char** environ;

namespace prism::testing {

inline const std::string kSourceDir = PRISM_SOURCE_DIR;
inline const std::string kPrism = PRISM_BINARY_DIR "/bin/prism";

struct RunResult {
  int exit_status = -1;
  std::string out;
  std::string err;
};

inline std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  for (std::size_t at = 0; (at = s.find(from, at)) != std::string::npos; at += to.size())
    s.replace(at, from.size(), to);
  return s;
}

inline std::string substitute_tmp(std::string s, const std::string& tmp) {
  return replace_all(std::move(s), "{tmp}", tmp);
}

inline std::string slurp(const std::filesystem::path& p) {
  Result<std::string> text = read_file(p.string());
  return text.is_ok() ? std::move(text).value() : std::string();
}

// Runs prism with stdin from /dev/null and stdout/stderr into files in `tmp`.
inline RunResult run_prism(const std::vector<std::string>& args, const std::string& tmp) {
  std::vector<std::string> argv_s = {kPrism};
  for (const std::string& a : args) argv_s.push_back(substitute_tmp(a, tmp));
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);

  const std::string out_path = tmp + "/stdout", err_path = tmp + "/stderr";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addchdir_np(&actions, kSourceDir.c_str());
  pid_t pid = 0;
  RunResult run;
  const int rc = posix_spawn(&pid, kPrism.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    ADD_FAILURE() << "cannot start " << kPrism << ": " << std::strerror(rc);
    return run;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  run.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  // Paths under the temporary directory print as "{tmp}", as in the arguments.
  run.out = replace_all(slurp(out_path), tmp, "{tmp}");
  run.err = replace_all(slurp(err_path), tmp, "{tmp}");
  return run;
}

}  // namespace prism::testing
