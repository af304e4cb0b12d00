// prism: the PrismLLM command line. Each subcommand lives in its own file;
// this one parses the command line, dispatches, and turns every failure into
// exactly one "error: ..." line on stderr with its exit status (1, whatever
// the failure's code: exit_status_of).
#include <exception>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/collective_command.h"
#include "cli/emulate_command.h"
#include "cli/interop_command.h"
#include "cli/memory_command.h"
#include "cli/replay_command.h"
#include "cli/search_command.h"
#include "cli/simulate_command.h"
#include "cli/validate_command.h"
#include "util/interrupt.h"
#include "util/status.h"
#include "util/text_error.h"

namespace {

constexpr int kExitError = 1;

// The one place a failure's code becomes the exit status. Every code is 1
// today (docs/cli.md); scripts tell failures apart by the message.
int exit_status_of(prism::StatusCode) {
  return kExitError;
}

int fail(std::string message, prism::StatusCode code = prism::StatusCode::kInvalidArgument) {
  // One printable line of bounded length, whatever the message holds (a
  // value quoted from a file may be megabytes, or hold control bytes).
  fmt::print(stderr, "error: {}\n", prism::printable_line(message));
  return exit_status_of(code);
}

// CLI11 reports "prism frobnicate" as a missing command; name the unknown
// command or option instead.
std::string parse_error_message(const CLI::App& app, const CLI::ParseError& e) {
  const std::vector<std::string> rest = app.remaining();
  if (!app.get_subcommands().empty() || rest.empty()) return e.what();
  if (rest.front().starts_with("-")) return fmt::format("unknown option '{}'", rest.front());
  std::string known;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    known += (known.empty() ? "" : ", ") + sub->get_name();
  return fmt::format("unknown command '{}' (commands: {})", rest.front(), known);
}

// A command that failed because it caught SIGINT or SIGTERM
// (util/interrupt.h) exits as a shell reports such a signal: 128 + N.
int finish(const prism::Result<int>& exit_status) {
  if (exit_status.is_ok()) return exit_status.value();
  const int status = fail(exit_status.status().message(), exit_status.status().code());
  const int sig = prism::caught_signal();
  return sig != 0 ? 128 + sig : status;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("PrismLLM: emulate LLM training jobs of thousands of GPUs from an execution graph",
               "prism");
  app.set_version_flag("--version", "prism " PRISM_VERSION);
  app.require_subcommand(1);
  const prism::ReplayCommand replay(app);
  const prism::CollectiveCommand collective(app);
  const prism::ValidateCommand validate(app);
  const prism::SimulateCommand simulate(app);
  const prism::SearchCommand search(app);
  const prism::BuildCommand build(app);
  const prism::MemoryCommand memory(app);
  const prism::EmulateCommand emulate(app);
  const prism::ImportCommand import(app);
  const prism::ExportCommand export_(app);
  const prism::CalibrateCommand calibrate(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    return fail(parse_error_message(app, e));
  }

  try {
    if (replay.selected()) return finish(replay.run());
    if (validate.selected()) return finish(validate.run());
    if (collective.selected()) return finish(collective.run());
    if (simulate.selected()) return finish(simulate.run());
    if (search.selected()) return finish(search.run());
    if (build.selected()) return finish(build.run());
    if (memory.selected()) return finish(memory.run());
    if (emulate.selected()) return finish(emulate.run());
    if (import.selected()) return finish(import.run());
    if (export_.selected()) return finish(export_.run());
    if (calibrate.selected()) return finish(calibrate.run());
  } catch (const std::exception& e) {  // e.g. out of memory: still one error line
    return fail(e.what(), prism::StatusCode::kInternal);
  }
  return fail("no command given");  // unreachable: CLI11 requires one
}
