// `prism collective`: nccl-tests' table (size, count, type, redop, root,
// out-of-place and in-place time, algbw, busbw, #wrong; then the algorithm,
// protocol and channels) of one operation over every GPU of a cluster, from
// the NCCL-faithful collective model, with nccl-tests' flags; --report
// writes the same rows as JSON. docs/cli.md documents every option.
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
  std::string redop_ = "sum";
  int root_ = 0;
  int iters_ = 20;
  int warmup_ = 5;
  int threads_ = 1;
  std::int64_t gpus_per_thread_ = 0;
  int check_ = 1;
};

}  // namespace prism
