// Import of PyTorch profiler traces (Kineto's Chrome-trace JSON, what
// torch.profiler's export_chrome_trace writes) as execution graphs.
//
// One trace holds one rank. Its GPU activity (kernels, memcpys, memsets, per
// CUDA stream) becomes that rank's program with the measured durations; NCCL
// kernels become collectives and point-to-point ops from the collective
// metadata PyTorch attaches to them ("Collective name", "In msg nelems",
// "Process Group Ranks", ...). A trace without GPU activity (a CPU-only run)
// becomes a program of host streams, one per thread, from its top-level
// operators and record_param_comms calls. docs/kineto.md has the mapping in
// full, its limits, and every rejection.
//
// Conversion is a pure function of the file's bytes and the options: the same
// trace gives the same program, and import_kineto the same graph.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "graph/graph.h"
#include "slicing/rank_program.h"
#include "util/status.h"

namespace prism {
namespace kineto {
struct ParsedTrace;
}

struct KinetoTraceOptions {
  // The rank and world size of the trace; unset: its distributedInfo's, or
  // rank 0 of 1 when it has none.
  std::optional<Rank> rank;
  std::optional<int> world_size;
  // Import device "[memory]" events (profile_memory=True) as alloc/free ops.
  bool memory = true;
};

// What a conversion found, for messages and tests.
struct KinetoSummary {
  bool gpu = false;     // device activity (else a host-only program)
  int compute_ops = 0;  // kernels, memcpys, memsets; or host operators
  int collectives = 0;
  int sends = 0;
  int recvs = 0;
  int stream_waits = 0;  // cross-stream dependencies (event record + wait pairs)
  int iterations = 0;    // ProfilerStep#N annotations
  int allocs = 0;
  int frees = 0;
  // Kept out of the program (and why they do no harm there):
  int comm_calls_without_metadata = 0;  // host comm calls with no collective args: compute ops
  int frees_without_alloc = 0;          // the block was allocated before the trace began
  int waits_without_record = 0;         // the event's record is not in the trace
};

struct KinetoTrace {
  RankProgram program;  // streams and ops; comms keyed as docs/kineto.md says
  int world_size = 1;
  KinetoSummary summary;
};

// Converts the trace text `text` (named `source` in messages) into one rank's
// program. Malformed input fails with the source and the event's index in
// traceEvents.
Result<KinetoTrace> parse_kineto_trace(std::string_view text, const std::string& source,
                                       const KinetoTraceOptions& options = {});
// The same from a file.
Result<KinetoTrace> load_kineto_trace(const std::filesystem::path& path,
                                      const KinetoTraceOptions& options = {});
// The same from a trace parsed already (kineto/trace_events.h), which the
// kernel calibration can read too: one parse for both.
Result<KinetoTrace> kineto_trace_of(const kineto::ParsedTrace& trace,
                                    const KinetoTraceOptions& options = {});

struct KinetoImportOptions {
  std::string name = "kineto";  // the graph's
  int gpus_per_node = 8;        // the layout's: one grid dim "rank" of the world size
  bool memory = true;           // as KinetoTraceOptions::memory
};

// Builds the graph of a job from one trace per rank. Ranks and the world size
// come from each trace's distributedInfo; when no trace has one, the files
// are ranks 0..N-1 in the order given. Every rank must be covered exactly
// once; a missing or repeated rank names the files. Ranks with equal
// programs share a role (slicing/rank_program.h); the result is finalized
// and validated.
Result<ExecutionGraph> import_kineto(const std::vector<std::filesystem::path>& files,
                                     const KinetoImportOptions& options = {});

}  // namespace prism
