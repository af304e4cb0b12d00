// Capture: what a live rank did, as the coordinator saw it, in the order it
// happened. Every message the rank sent (communicators, ops with the graph op
// each one matched, waits, memory events, markers, the compute it measured,
// its goodbye) and every answer it got (completions, horizons), with virtual
// times. This is the raw material slicing builds graphs from; the file
// format is in docs/emulate.md ("Capture files").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "wire/protocol.h"

namespace prism::runtime {

struct CaptureEntry {
  wire::Message message;
  std::int32_t graph_op = kNone;  // an op: the graph op it matched
};

struct RankCapture {
  Rank rank = 0;
  int world_size = 0;
  std::int64_t pid = 0;
  std::string program;
  std::string job;
  std::vector<CaptureEntry> entries;
};

// The capture as JSON ("format": "prism-capture", "version": 1), one event
// per line, deterministic.
std::string format_capture_json(const RankCapture& c);

}  // namespace prism::runtime
