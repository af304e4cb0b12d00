#include "cli/validate_command.h"

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "graph/graph_json.h"

namespace prism {

ValidateCommand::ValidateCommand(CLI::App& parent)
    : app_(parent.add_subcommand("validate", "Check that an execution graph loads and is valid")) {
  app_->add_option("GRAPH", graph_path_, "Execution graph file (docs/graph-format.md)")
      ->required()
      ->type_name("FILE");
}

bool ValidateCommand::selected() const {
  return app_->parsed();
}

Result<int> ValidateCommand::run() const {
  PRISM_ASSIGN_OR_RETURN(ExecutionGraph g, load_graph(graph_path_));
  const auto count = [](std::size_t n, const char* word) {
    return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
  };
  fmt::print("{}: ok ({}, {}, {})\n", graph_path_,
             count(static_cast<std::size_t>(g.world_size()), "rank"), count(g.roles.size(), "role"),
             count(g.total_ops(), "op"));
  return 0;
}

}  // namespace prism
