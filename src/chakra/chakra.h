// Chakra execution traces (MLCommons Chakra ET, what ASTRA-sim consumes):
// export of an ExecutionGraph and import of a set of traces. docs/chakra.md
// has the mapping in both directions and its limits.
//
// On disk a job is one trace per rank, `<prefix>.<rank>.et`, and a
// communicator-group file, `<prefix>.comm_groups.json` (ASTRA-sim's
// --comm-group-configuration: {"<group id>": [ranks...], ...}). A trace is a
// sequence of messages each preceded by its length as a varint32: one
// ChakraProtoMsg.GlobalMetadata, then ChakraProtoMsg.Node's (et_def.proto).
//
// A trace is a DAG per rank with no streams and names concrete ranks; a graph
// has streams and roles and names slots. Export writes every op of a rank's
// role as one node whose id is the op's index; import rebuilds one program per
// rank and shares roles through assemble_graph() (slicing/rank_program.h).
#pragma once

#include <filesystem>
#include <string>

#include "compute/compute_model.h"
#include "graph/graph.h"
#include "util/status.h"

namespace prism {

struct ChakraExportOptions {
  std::string prefix = "workload";  // file names: <prefix>.<rank>.et
  // Durations of compute ops that carry a KernelCost instead of a fixed
  // duration (ASTRA-sim needs a duration). Without a model such an op is an
  // error naming it.
  const ComputeModel* compute = nullptr;
};

// Writes one trace per rank of `g` (finalized and valid) and the group file
// into `out_dir`, created if missing. Each file is written atomically; rank
// files of this prefix beyond the world size, left by an earlier export, are
// removed. Same graph and options -> the same bytes.
Status export_chakra(const ExecutionGraph& g, const std::filesystem::path& out_dir,
                     const ChakraExportOptions& options = {});

struct ChakraImportOptions {
  // The group file; empty: <prefix>.comm_groups.json beside the traces, if
  // it exists (collectives whose pg_name is empty or "0" need none: they run
  // over every rank, as in ASTRA-sim).
  std::filesystem::path comm_groups;
  int gpus_per_node = 8;  // the imported layout's
  std::string name;       // the graph's; empty: the prefix
};

// `dir_or_prefix`: a directory holding the traces of one prefix, or the
// prefix itself ("traces/workload" for traces/workload.0.et, ...). Ranks are
// 0..N-1, each one file. Malformed input fails with the file and node id.
Result<ExecutionGraph> import_chakra(const std::filesystem::path& dir_or_prefix,
                                     const ChakraImportOptions& options = {});

}  // namespace prism
