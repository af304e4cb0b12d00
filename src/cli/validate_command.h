// `prism validate GRAPH`: loads an execution graph, runs every semantic check
// of graph/validate.h and prints one line: "GRAPH: ok (8 ranks, 2 roles, 120
// ops)". A bad graph is an error (the message names the place).
#pragma once

#include <string>

#include "util/status.h"

namespace CLI {
class App;
}  // namespace CLI

namespace prism {

class ValidateCommand {
 public:
  // Registers the subcommand and its options on `parent`.
  explicit ValidateCommand(CLI::App& parent);

  bool selected() const;
  // The exit status, or the error to print.
  Result<int> run() const;

 private:
  CLI::App* app_;
  std::string graph_path_;
};

}  // namespace prism
