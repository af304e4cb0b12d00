// ProgramBuilder: gathers one rank's ops from a trace, each with the host time
// at which it was issued, and lays them out as a RankProgram in issue order
// (internal to src/kineto).
//
// A trace records when each GPU op was launched (its runtime call) and when
// it ran; the graph wants the ops in the order the host issued them, each on
// its stream. Ops are sorted by (issue time, phase, correlation id, position
// on the stream, event index): correlation ids number API calls in the order
// they were made, and a stream's ops are given non-decreasing issue times and
// correlations by the caller, so every stream keeps its execution order.
// Event names and op names are interned in order of first use, so that ranks
// with the same program produce identical roles.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "kineto/comm_args.h"
#include "kineto/kineto.h"
#include "kineto/trace_events.h"
#include "slicing/rank_program.h"
#include "util/status.h"

namespace prism::kineto {

inline constexpr std::size_t kMaxStreams = 65535;  // Op::stream is 16 bits

struct Pending {
  std::int64_t key_ns = 0;  // host issue time
  int phase = 1;            // 0: iteration begin marker, 1: an op, 2: iteration end marker
  std::int64_t corr = -1;   // correlation id of the issuing API call, if any
  std::int64_t seq = 0;     // position on its stream
  std::size_t event = 0;    // index in traceEvents
  // kCollective: ref = comm index; kSend/kRecv: ref = peer index; kEventRecord/
  // kEventWait: ref = an id from add_event(); kFree: ref = index of the
  // Pending alloc (as add() returned it).
  Op op;
  std::string name;
};

class ProgramBuilder {
 public:
  ProgramBuilder(std::string source, Rank rank);

  int add_stream(std::string name);  // returns its index
  // Returns the index to refer to this pending op (a free names its alloc by it).
  int add(Pending p);
  // Makes `op` the communication `call`: kind, collective, dtype, bytes,
  // root, and ref to its communicator or peer. One communicator key with two
  // member lists in one trace is an error naming `at`.
  Status set_comm(const CommCall& call, const std::string& at, Op* op);
  // A new CUDA event; events are renamed in order of first use by finish().
  int add_event() { return num_events_++; }

  // Issue order; fills `summary`'s op counts.
  RankProgram finish(KinetoSummary* summary) &&;

 private:
  Result<int> comm(const ProgramComm& c, const std::string& at);
  int peer(Rank r);

  RankProgram program_;
  std::vector<std::string> streams_;
  std::vector<Pending> pending_;
  int num_events_ = 0;
};

// The ProfilerStep#N annotations of the host, in time order.
struct Step {
  const TraceEvent* event;
  int index;  // N
};
std::vector<Step> profiler_steps(const ParsedTrace& t);

// An iteration marker at the start of each step and an iteration end after
// the last, on `stream`.
void add_markers(const std::vector<Step>& steps, int stream, ProgramBuilder* b);

// The "[memory]" events of CUDA device `device` (-1: any) as allocs and frees
// on `stream`. A free pairs with the latest alloc of its address; a free of a
// block allocated before the trace began is skipped and counted.
Status add_memory(const ParsedTrace& t, std::int64_t device, int stream, ProgramBuilder* b,
                  KinetoSummary* summary);

}  // namespace prism::kineto
