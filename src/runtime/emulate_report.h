// What `prism emulate` prints and writes: the emulated iteration, and for
// each real rank its emulated iteration time split into real compute and
// emulated waiting, beside what the pure replay (no real ranks) predicted.
// docs/emulate.md documents both forms.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "report/html_page.h"
#include "report/simulate_report.h"
#include "runtime/coordinator.h"

namespace prism::runtime {

struct EmulateSummary {
  std::string job;
  int world_size = 0;
  std::string program;
  // The emulation as the coordinator reported it: its replay (the iteration
  // over all ranks, folding, op events), each real rank's times, captures
  // and measured compute.
  CoordinatorResult emulated;
  SimTime predicted_iteration_time;  // the pure replay's
  bool predicted_completed = true;   // false: the pure replay hung (--fail-node)
  std::vector<SimTime> predicted;    // per real rank: its pure-replay iteration time
  std::string out_of_memory;         // the OOM's text when the emulation ended with one
  // With what-if options: the pure replay perturbed (predicted_iteration_time)
  // and unperturbed. The emulation itself runs perturbed only: its
  // iteration is compared with the unperturbed prediction.
  std::optional<WhatIfComparison> what_if;
  // The host the real ranks and the coordinator ran on: more of them than
  // cores, and their compute slowed each other (times are upper bounds).
  int host_cores = 0;
  bool external = false;  // the real ranks ran on other hosts (--external-ranks)
  bool oversubscribed() const {
    return !external && host_cores > 0 && static_cast<int>(emulated.live.size()) + 1 > host_cores;
  }
  // A node failure (--fail-node) hung the emulation: emulated.replay.failure
  // says where, and the real ranks were stopped.
  bool hung() const { return emulated.replay.failure && emulated.replay.failure->hung; }
  // The headline: the emulated iteration, never below a real rank's own
  // (the replay's is its ranks' longest iteration; a real rank's mean
  // includes what its process did between iterations).
  SimTime iteration_time() const;
};

// The CPUs this process may run on (its affinity mask; taskset narrows it).
int host_cores();

std::string format_emulate_text(const EmulateSummary& s);
// Indented JSON ending in a newline; keys in a fixed order.
std::string format_emulate_json(const EmulateSummary& s);
// The HTML report's headline (report/replay_html.h): job, real ranks, the
// emulated iteration against the prediction.
std::vector<HtmlFact> emulate_facts(const EmulateSummary& s);

}  // namespace prism::runtime
