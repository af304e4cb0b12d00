// The HTML report (`--html FILE` of simulate, replay, emulate and search):
// one self-contained page, opened in any browser without the network. Plain
// data in (HtmlPage: built from a replay by report/replay_html.h, from a
// search by planning/search_html.h), one string out.
//
// The charts are inline SVG drawn here; the page has no external URL, no
// font to fetch, and one small inline script: it records any script error
// into the page (#prism-errors) and marks the page loaded
// (<html data-prism="loaded">), which the headless-browser test reads.
// Native SVG <title> elements are the hover tooltips. Every string that
// comes from the user (job, role, op and slot names) is escaped. Numbers
// have fixed decimals and nothing depends on the clock: the same page data
// gives the same bytes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "replay/result.h"
#include "report/breakdown.h"
#include "util/units.h"

namespace prism {

// "a < b & 'c'" -> "a &lt; b &amp; &#39;c&#39;": text and attribute values.
std::string html_escape(std::string_view text);

struct HtmlFact {
  std::string label;
  std::string value;
};

// An interval of a stage's timeline charged to one category
// (report/breakdown.h: compute, optimizer, exposed communication per group,
// bubble).
using HtmlSpan = CategorySpan;

// One shown rank: a role's representative (or a real rank of an emulation).
struct HtmlStage {
  std::string name;             // "stage0: rank 0 of 8 (virtual)"
  std::vector<HtmlSpan> spans;  // within the page's window, in time order
  Breakdown breakdown;          // the spans summed
  // Memory samples of the rank (MemorySample::rank ignored), in time order;
  // the first may precede the window (the value when it opens).
  std::vector<MemorySample> memory;
};

// Collective or send/recv calls of one stage that share an op, a group and
// a size, with what NCCL's tuner picks for them and how long they took.
struct HtmlCollective {
  std::string stage;      // the HtmlStage's name
  std::string op;         // the op's label ("tp_all_reduce", "all_reduce", "send")
  std::string kind;       // "all_reduce", "send", ...
  std::string group;      // the communicator slot: "tp", "dp_cp", "pp_next", ...
  int group_ranks = 0;    // its members (2 for send/recv)
  int group_nodes = 0;    // the nodes they span
  Bytes bytes;            // per call
  int calls = 0;          // in the window
  std::string algorithm;  // "Ring", "NVLS", "P2P"; "-" when none is allowed
  std::string protocol;   // "Simple", "LL", "LL128"
  int channels = 0;
  SimTime transfer;  // summed over the calls: every member present to the end
  SimTime wait;      // summed: arrival to every member present
};

// A configuration of `prism search` on the scatter.
struct HtmlPoint {
  std::string label;  // the configuration, "tp=8 sp pp=4 ..."
  double tokens_per_s_per_gpu = 0;
  Bytes peak;  // device memory; for an out-of-memory one, what it needs
  bool oom = false;
  // A few more figures for the Pareto table and the tooltip ("iteration
  // 12.34 ms, MFU 41.2%").
  std::string detail;
};

// The indices of the points on the Pareto front of tokens/s per GPU (more
// is better) against peak memory (less is better): fitting points that no
// other fitting point beats on one and matches or beats on the other.
// Identical points are all on it. Ascending memory, then index.
std::vector<std::size_t> pareto_front(const std::vector<HtmlPoint>& points);

struct HtmlPage {
  std::string title;  // "prism simulate: llama3-8b"
  std::vector<HtmlFact> facts;
  std::vector<std::string> notes;  // shown under the facts (an OOM, a cap on what is shown)
  std::string text;                // the command's printed summary, shown as it printed it
  // Replays: the iteration shown, and each stage within it.
  SimTime window_begin, window_end;
  std::vector<HtmlStage> stages;
  Bytes capacity;  // a GPU's memory, the memory charts' limit line (0: none)
  std::vector<HtmlCollective> collectives;
  // Searches: every simulated configuration.
  std::vector<HtmlPoint> points;
};

// The page: summary, then the replay's sections (timeline, breakdown,
// memory, collectives) when it has stages, the search's (scatter with the
// Pareto front and its table) when it has points.
std::string format_html_page(const HtmlPage& page);

}  // namespace prism
