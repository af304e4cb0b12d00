#include "cli/emulate_command.h"

#include <cstdio>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/replay_command.h"
#include "util/interrupt.h"

namespace prism {

EmulateCommand::EmulateCommand(CLI::App& parent)
    : app_(parent.add_subcommand(
          "emulate", "Run real ranks of a job against a full-scale emulation of the others")) {
  app_->footer(
      "Example: prism emulate job.yaml --real-ranks 0,63 -- build/bin/rank_player\n"
      "Exit status: 0 every real rank finished, 1 error (a rank crashed, hung, or did what the "
      "graph does not), 4 a rank ran out of memory, 6 a --fail-node failure hung the job (the "
      "real ranks stopped; summary and report still written), 128+N ended by signal N (SIGINT: "
      "130, SIGTERM: 143; the real ranks stopped first).");
  job_.add_to(app_);
  app_->add_option("--real-ranks", options_.real_ranks, "Ranks to run for real, e.g. 0,4095 or 0-3")
      ->required()
      ->type_name("LIST");
  output_.add_to(app_, "Write a Chrome/Perfetto trace of real and traced ranks to FILE",
                 "Virtual ranks to trace besides the real ones");
  app_->add_option("--capture", options_.capture_dir,
                   "Write what each real rank did to DIR/rank<N>.json (docs/emulate.md)")
      ->type_name("DIR");
  app_->add_option("--listen", options_.listen,
                   "Where real ranks reach the coordinator: tcp:HOST:PORT for ranks on other "
                   "hosts (default: a private Unix socket)")
      ->type_name("ADDRESS");
  app_->add_flag("--external-ranks", options_.external_ranks,
                 "Start no real rank: they are started elsewhere (another host's launcher) and "
                 "connect to --listen tcp:HOST:PORT; their environment goes to --rank-env "
                 "(docs/emulate.md, \"Real ranks on other hosts\")");
  app_->add_option("--rank-env", options_.external_env_path,
                   "With --external-ranks: write the environment every real rank needs "
                   "(NAME=VALUE lines, mode 0600: it holds the run's secret) to FILE")
      ->type_name("FILE");
  app_->add_option("--timeout", options_.timeout_s,
                   "Seconds a real rank may take to connect, or stay silent while the emulation "
                   "waits for it")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app_->add_option("--master-port", options_.master_port,
                   "Port of the rendezvous store PrismLLM hosts on 127.0.0.1 (MASTER_PORT for "
                   "the real ranks; 0: any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  fold_.add_to(app_, "Simulate every virtual rank instead of one per class");
  nccl_.add_to(app_);
  CLI::Option* graph =
      app_->add_option("--graph", options_.graph_path,
                       "Emulate against this graph (prism build; or --save-graph of an earlier "
                       "run) instead of building or capturing one")
          ->type_name("FILE");
  app_->add_option("--slices", options_.slices_dir,
                   "Write the program's captures, one rank per role, to DIR/slice-rank<N>.json "
                   "(for prism build --from-slices)")
      ->type_name("DIR")
      ->excludes(graph);
  app_->add_option("--capture-jobs", capture_jobs_,
                   "Capture up to N roles at once, each beside the others as the job's ranks run "
                   "(1: one after another)")
      ->type_name("N")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str()
      ->excludes(graph);
  app_->add_option("--capture-ranks", options_.capture_ranks,
                   "Capture these ranks too, each checked op by op against its role's captured "
                   "rank, e.g. 0,63; where no rule of the layout splits a role whose ranks "
                   "differ, each listed rank of it is a role of its own")
      ->type_name("LIST")
      ->excludes(graph);
  app_->add_flag("!--no-verify-roles", options_.verify_roles,
                 "Capture one rank per role only (by default a second rank of each role is "
                 "captured and checked against the first, and a role whose ranks differ is "
                 "split)")
      ->excludes(graph);
  app_->add_option("--save-graph", options_.save_graph_path,
                   "Write the job's graph (built, or captured from the program) to FILE")
      ->type_name("FILE");
  memory_.add_to(app_);
  what_if_.add_to(app_);
  // The virtual ranks and the network are perturbed; the real ranks run
  // for real, so only a node of virtual ranks fails (docs/emulate.md,
  // "What-if").
  what_if_.fail_node_option->description(
      "What if node N, a node of virtual ranks only, failed at TIME (e.g. 1@1.5s): its ranks "
      "stop; once the job hangs, the real ranks waiting in its collectives are told and stopped, "
      "as NCCL's watchdog would end them, and the summary names what blocks, who waits, the "
      "hang and the watchdog (exit status 6)");
  app_->add_option("PROGRAM", options_.program,
                   "The program to run for each real rank, after -- (none with --external-ranks)")
      ->type_name("PROGRAM ARGS...");
}

bool EmulateCommand::selected() const {
  return app_->parsed();
}

Result<int> EmulateCommand::run() const {
  // SIGINT/SIGTERM end the run cleanly: its real ranks stopped, its private
  // directory removed; main() then exits with 128 + the signal.
  catch_termination_signals();
  runtime::EmulationOptions o = options_;
  PRISM_ASSIGN_OR_RETURN(o.nccl, nccl_.selection());
  PRISM_RETURN_IF_ERROR(
      check_output_files(*app_, {"--report", "--trace", "--html", "--save-graph", "--rank-env"},
                         job_.job_path, "job spec"));
  // The option blocks shared with other commands; the rest went straight
  // into options_.
  o.job = job_;
  o.memory = memory_;
  o.trace_ranks = output_.trace_ranks;
  PRISM_ASSIGN_OR_RETURN(o.trace_level, output_.level());
  o.report_path = output_.report_path;
  o.trace_path = output_.trace_path;
  o.html_path = output_.html_path;
  o.fold = fold_.fold();
  if (app_->count("--capture-jobs") > 0) o.capture_jobs = capture_jobs_;
  o.what_if = [w = what_if_](int world_size) { return w.what_if(world_size); };

  runtime::Emulation emulation(std::move(o));
  PRISM_ASSIGN_OR_RETURN(const runtime::EmulationResult result, emulation.run());
  std::fputs(runtime::format_emulate_text(result.summary).c_str(), stdout);
  std::fflush(stdout);
  PRISM_RETURN_IF_ERROR(emulation.write_outputs(result));
  if (!result.summary.out_of_memory.empty()) return kExitOutOfMemory;
  if (result.summary.hung()) return kExitNodeFailure;
  return result.real_rank_failed ? 1 : 0;
}

}  // namespace prism
