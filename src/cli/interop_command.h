// `prism import` and `prism export`: execution graphs to and from other
// tools' traces (docs/chakra.md, docs/kineto.md).
//
//   prism import chakra DIR|PREFIX -o GRAPH   MLCommons Chakra ET, one per rank
//   prism import kineto TRACE... -o GRAPH     PyTorch profiler JSON, one per rank
//   prism export chakra GRAPH -o DIR          Chakra ET for ASTRA-sim
//   prism calibrate kineto TRACE... -o FILE   kernel times of a profiled step
//                                             as a --kernel-db file
//
// Each prints one line saying what it wrote: ranks, roles and ops for an
// import, ranks and files for an export, signatures for a calibration (and
// what it matched and could not map). Malformed input is an error naming
// the file and the place in it.
#pragma once

#include <string>
#include <vector>

#include "util/status.h"

namespace CLI {
class App;
}  // namespace CLI

namespace prism {

class ImportCommand {
 public:
  explicit ImportCommand(CLI::App& parent);
  bool selected() const;
  Result<int> run() const;

 private:
  CLI::App* app_;
  CLI::App* chakra_;
  CLI::App* kineto_;
  std::string chakra_input_;
  std::vector<std::string> kineto_inputs_;
  std::string output_;
  std::string comm_groups_;
  std::string name_;
  int gpus_per_node_ = 8;
  bool no_memory_ = false;
};

class ExportCommand {
 public:
  explicit ExportCommand(CLI::App& parent);
  bool selected() const;
  Result<int> run() const;

 private:
  CLI::App* app_;
  CLI::App* chakra_;
  std::string graph_path_;
  std::string out_dir_;
  std::string prefix_ = "workload";
};

class CalibrateCommand {
 public:
  explicit CalibrateCommand(CLI::App& parent);
  bool selected() const;
  Result<int> run() const;

 private:
  CLI::App* app_;
  CLI::App* kineto_;
  std::vector<std::string> inputs_;
  std::string output_;
  std::string gpu_;
  std::string date_;
};

}  // namespace prism
