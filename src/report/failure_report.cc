#include "report/failure_report.h"

#include <iterator>

#include <fmt/format.h>

#include "graph/rank_list.h"

namespace prism {
namespace {

std::string ms(SimTime t) {
  return fmt::format("{:.3f} ms", static_cast<double>(t.ns) / 1e6);
}

// The watchdog's timeout as torch prints it: seconds.
std::string timeout_text(SimTime t) {
  return fmt::format("{:g} s", static_cast<double>(t.ns) / 1e9);
}

// A summary shows the first few blocked ops; the report lists them all.
constexpr std::size_t kShown = 8;

}  // namespace

std::string node_failure_text(const NodeFailureReplay& f, int label_width) {
  std::string out;
  const auto line = [&](std::string_view label, const std::string& value) {
    fmt::format_to(std::back_inserter(out), "{:<{}}{}\n", label, label_width, value);
  };
  line("node failure:",
       fmt::format("node {} (ranks {}) stops at {}", f.node, format_rank_list(f.ranks), ms(f.at)));
  if (!f.hung) {
    line("", "its ranks had finished by then: the iteration completes without them");
    return out;
  }
  if (f.blocked.empty()) {
    line("", fmt::format("the job hangs: no op completes after {}; only the node's ranks had work "
                         "left, no other rank waits on them",
                         ms(f.hang_at)));
  } else {
    line("", fmt::format("the job hangs: no op completes after {}; {} communication op{} never "
                         "complete{}:",
                         ms(f.hang_at), f.blocked.size(), f.blocked.size() == 1 ? "" : "s",
                         f.blocked.size() == 1 ? "s" : ""));
  }
  for (std::size_t i = 0; i < f.blocked.size() && i < kShown; ++i) {
    const NodeFailureReplay::Blocked& b = f.blocked[i];
    line("",
         fmt::format("  {}; rank{} {} wait{} since {}", b.what, b.waiting.size() > 1 ? "s" : "",
                     format_rank_list(b.waiting), b.waiting.size() > 1 ? "" : "s", ms(b.since)));
  }
  if (f.blocked.size() > kShown)
    line("", fmt::format("  ... and {} more (the --report file lists them all)",
                         f.blocked.size() - kShown));
  if (f.other_blocked_streams > 0)
    line("", fmt::format("  and {} more stream{} of surviving ranks wait behind their own ops",
                         f.other_blocked_streams, f.other_blocked_streams == 1 ? "" : "s"));
  if (f.watchdog_at) {
    line("watchdog:",
         fmt::format("--nccl-timeout {}: rank {}'s fires at {:.3f} s ({}): ProcessGroupNCCL "
                     "aborts the process and the job errors",
                     timeout_text(f.timeout), f.watchdog_rank, f.watchdog_at->seconds(),
                     f.watchdog_what));
  } else {
    line("watchdog:",
         "no surviving rank waits in a collective: the job ends when the launcher "
         "sees the node's processes die");
  }
  return out;
}

nlohmann::ordered_json node_failure_json(const NodeFailureReplay& f) {
  using Json = nlohmann::ordered_json;
  const auto s = [](SimTime t) { return static_cast<double>(t.ns) / 1e9; };
  Json blocked = Json::array();
  for (const NodeFailureReplay::Blocked& b : f.blocked)
    blocked.push_back(Json{{"op", b.what}, {"waiting_ranks", b.waiting}, {"since_s", s(b.since)}});
  Json j{{"node", f.node},
         {"ranks", f.ranks},
         {"fail_time_s", s(f.at)},
         {"hung", f.hung},
         {"hang_time_s", f.hung ? Json(s(f.hang_at)) : Json()},
         {"blocked", std::move(blocked)},
         {"other_blocked_streams", f.other_blocked_streams},
         {"nccl_timeout_s", s(f.timeout)},
         {"watchdog_time_s", f.watchdog_at ? Json(s(*f.watchdog_at)) : Json()},
         {"watchdog_rank", f.watchdog_at ? Json(f.watchdog_rank) : Json()},
         {"watchdog_op", f.watchdog_at ? Json(f.watchdog_what) : Json()}};
  return j;
}

}  // namespace prism
