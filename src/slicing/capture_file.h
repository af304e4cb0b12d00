// Capture: what a live rank did, as the coordinator saw it, in the order it
// happened. Every message the rank sent (communicators, ops with the graph op
// each one matched, waits, memory events, markers, the compute it measured,
// its goodbye) and every answer it got (completions, horizons), with virtual
// times. The runtime records it (runtime/coordinator.h,
// runtime/program_capture.h); slicing builds graphs from it
// (slicing/capture_graph.h).
//
// On disk a capture is JSON, "format": "prism-capture", version 1, one event
// per line (docs/emulate.md, "Capture files"). This file is that format's one
// writer and its one reader: the reader turns each event back into the
// wire::Message it was written from, so that a capture read from a file and
// one kept in memory are the same typed record. Fields the writer leaves out
// of an event (a Hello's local_rank and program, a Welcome's rank) read as
// their defaults; fields the format marks optional read as the message's
// defaults when absent.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "graph/graph.h"
#include "util/status.h"
#include "wire/protocol.h"

namespace prism {

struct CaptureEntry {
  wire::Message message;
  std::int32_t graph_op = kNone;  // an op: the graph op it matched
};

// An object the rank sent with send_object_list or broadcast_object_list,
// as prism_torch published it (slicing/object_keys.h): its key from
// "prism/object/" on, and the value (the objects' sizes and pickles).
struct CapturedObject {
  std::string key;
  std::vector<std::uint8_t> bytes;
};

struct RankCapture {
  Rank rank = 0;
  int world_size = 0;
  std::int64_t pid = 0;
  std::string program;
  std::string job;
  std::vector<CaptureEntry> entries;
  std::vector<CapturedObject> objects{};  // by key
};

// The capture as JSON ("format": "prism-capture", "version": 1), one event
// per line, deterministic.
std::string format_capture_json(const RankCapture& c);

// Whether `doc` declares itself a capture ("format": "prism-capture").
bool is_capture_document(const nlohmann::json& doc);

// The capture in `text` (a document format_capture_json() wrote, or one
// written by hand to the same format). Errors name `source` and, for an
// event, its index ("cap.json: event 3: no \"at\"").
Result<RankCapture> parse_capture_json(std::string_view text, const std::string& source);
// The same, of a document already parsed.
Result<RankCapture> capture_from_json(const nlohmann::json& doc, const std::string& source);

}  // namespace prism
