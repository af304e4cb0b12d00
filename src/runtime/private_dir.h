// The private directory of one `prism emulate` run (the graph, the
// coordinator's socket, the captures): made in the temporary directory as
// prism-XXXXXX, mode 0700, with an `owner` file naming the process that made
// it (pid and its start time in clock ticks since boot, /proc/PID/stat's
// field 22, so that a reused pid is not taken for the owner).
//
// A run removes its directory when it ends, also on SIGTERM/SIGINT; one that
// is killed with SIGKILL cannot. The next run sweeps those: a directory of
// this user whose owner process is gone (or is another process with the same
// pid) is removed before the new one is made. A directory without an owner
// file, of another user, or whose owner lives is left alone.
#pragma once

#include <string>
#include <vector>

#include "util/status.h"

namespace prism::runtime {

// Sweeps stale directories in `temp_dir`, then makes a new one there and
// writes its owner file. Returns its path.
Result<std::string> make_private_dir(const std::string& temp_dir);

// The stale private directories of this user in `temp_dir` that
// make_private_dir would remove, removed; returns their paths (sorted).
std::vector<std::string> sweep_stale_private_dirs(const std::string& temp_dir);

// "PID START" for process `pid`, START from /proc/PID/stat; empty when the
// process does not exist.
std::string process_identity(int pid);

}  // namespace prism::runtime
