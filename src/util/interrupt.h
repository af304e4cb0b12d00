// Termination signals (SIGINT, SIGTERM) for a command that must clean up
// before it ends: `prism emulate` stops its real ranks and removes its
// private directory. Once caught, the first such signal is only recorded,
// for the work in progress to notice (interruption()) and unwind; a second
// one ends the process at once, by the signal's default action.
#pragma once

#include "util/status.h"

namespace prism {

// Installs the handlers (SA_RESTART: system calls in progress go on).
void catch_termination_signals();
// The signal caught, or 0.
int caught_signal();
// ok, or aborted("interrupted by SIGTERM") once a signal was caught.
Status interruption();

}  // namespace prism
