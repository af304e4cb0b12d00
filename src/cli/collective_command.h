// `prism collective`: an nccl-tests-style table (size, time, algbw, busbw,
// algorithm, protocol, channels) of one operation over every GPU of a
// cluster, from the NCCL-faithful collective model; --report writes the same
// rows as JSON. docs/cli.md documents every option.
#pragma once

#include <cstdint>
#include <string>

#include "util/status.h"

namespace CLI {
class App;
}  // namespace CLI

namespace prism {

class CollectiveCommand {
 public:
  explicit CollectiveCommand(CLI::App& parent);

  bool selected() const;
  Result<int> run() const;

 private:
  CLI::App* app_;
  std::string cluster_ = "dgx-h100";
  std::int64_t num_gpus_ = 0;
  std::int64_t num_nodes_ = 0;
  std::string op_ = "all_reduce";
  std::string dtype_ = "fp32";
  std::string min_bytes_ = "8";
  std::string max_bytes_ = "8G";
  std::int64_t step_factor_ = 2;
  std::string algo_;
  std::string proto_;
  std::string report_path_;
};

}  // namespace prism
