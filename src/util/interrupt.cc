#include "util/interrupt.h"

#include <signal.h>
#include <string.h>

#include <atomic>
#include <string>

namespace prism {
namespace {

std::atomic<int> g_caught{0};
static_assert(std::atomic<int>::is_always_lock_free, "used in a signal handler");

void on_signal(int sig) {
  if (g_caught.exchange(sig) == 0) return;
  ::signal(sig, SIG_DFL);  // the second: the default action, now
  ::raise(sig);
}

}  // namespace

void catch_termination_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM}) ::sigaction(sig, &sa, nullptr);
}

int caught_signal() {
  return g_caught.load();
}

Status interruption() {
  const int sig = caught_signal();
  if (sig == 0) return Status::ok();
  const char* name = ::sigabbrev_np(sig);
  return Status::aborted(name != nullptr ? std::string("interrupted by SIG") + name
                                         : "interrupted by signal " + std::to_string(sig));
}

}  // namespace prism
