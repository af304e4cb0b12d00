// What the commands that read a job spec share: its options (JOB, --set,
// --kernel-db, --no-kernel-db; simulation/job.h prepares the job), and the
// check of output-file options against the input and each other.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include "simulation/job.h"
#include "util/progress.h"
#include "util/status.h"

namespace CLI {
class App;
}  // namespace CLI

namespace prism {

struct JobOptions : JobInput {
  // Registers JOB, --set, --kernel-db and --no-kernel-db on `app`.
  void add_to(CLI::App* app);
};

// Checks the output-file options `flags` of `app` that were given: each
// names a file, none is the input file (`input`, a `what`: "graph", "job
// spec"), no two are the same file.
Status check_output_files(const CLI::App& app, std::initializer_list<const char*> flags,
                          const std::string& input, std::string_view what);

}  // namespace prism
