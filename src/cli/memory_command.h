// `prism memory replay SNAPSHOT`: replays a PyTorch CUDA memory history
// (converted by scripts/memory_snapshot_to_json.py) through the caching-
// allocator model (mem/snapshot_replay.h), prints recorded against modelled
// peaks and the first event where they part, and writes the JSON report
// when asked. Exit status 0 when every event and both peaks match (and,
// with --strict, the final segments), kExitDiverged when the model departs
// from the recording; a snapshot that cannot be replayed is an error.
// docs/cli.md documents every option.
#pragma once

#include <string>

#include "util/status.h"

namespace CLI {
class App;
}  // namespace CLI

namespace prism {

inline constexpr int kExitDiverged = 5;

class MemoryCommand {
 public:
  // Registers `memory` and its `replay` subcommand on `parent`.
  explicit MemoryCommand(CLI::App& parent);

  bool selected() const;
  // The exit status, or the error to print.
  Result<int> run() const;

 private:
  CLI::App* memory_;
  CLI::App* replay_;
  std::string snapshot_path_;
  std::string alloc_conf_;
  double capacity_gib_ = 0;
  std::string report_path_;
  bool strict_ = false;
};

}  // namespace prism
