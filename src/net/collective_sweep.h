// CollectiveSweep: the rows of an nccl-tests run (all_reduce_perf -b MIN -e MAX
// -f FACTOR) as the collective model predicts them for one communicator that
// spans the whole cluster. Sizes and element counts follow nccl-tests: the
// size is the whole buffer (all-gather: output, reduce-scatter: input,
// all-to-all: what one rank sends), rounded down to whole elements per rank;
// busbw = algbw x 2(n-1)/n for all-reduce, (n-1)/n for all-gather,
// reduce-scatter and all-to-all, 1 for the rest.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "net/nccl_tests_names.h"
#include "net/nccl_tuner.h"
#include "util/status.h"
#include "util/units.h"
#include "util/vocab.h"

namespace prism {

// The nccl-tests operations: the collectives plus send_recv (each rank sends
// to the next and receives from the previous, as sendrecv_perf does).
struct SweepOp {
  bool send_recv = false;
  CollectiveKind collective = CollectiveKind::kAllReduce;
};
// "all_reduce" or "allreduce" (nccl-tests' binary names without _perf), ...
Result<SweepOp> parse_sweep_op(std::string_view name);
std::string_view sweep_op_name(SweepOp op);

struct SweepOptions {
  SweepOp op;
  DType dtype = DType::kFloat32;  // nccl-tests' default
  std::int64_t min_bytes = 8;
  std::int64_t max_bytes = std::int64_t{8} << 30;
  std::int64_t step_factor = 2;  // nccl-tests -f
  // nccl-tests' other options, printed as it prints them; the model's times
  // do not depend on them (NCCL's tuning ignores the reduction, the root
  // and the iterations).
  TestRedop redop = TestRedop::kSum;  // -o
  int root = 0;                       // -r: broadcast and reduce
  int iters = 20, warmup_iters = 5;   // -n, -w
  int threads = 1;                    // -t: nThread (nGpus is the communicator / threads)
};

struct SweepRow {
  std::int64_t bytes = 0;
  std::int64_t count = 0;  // elements per rank, as nccl-tests prints it
  SimTime time;
  double algbw_GBps = 0;
  double busbw_GBps = 0;
  NcclAlgo algo = NcclAlgo::kRing;
  NcclProto proto = NcclProto::kSimple;
  int channels = 0;
};

// Checks sizes (1 <= min <= max <= 2^50, factor >= 2) and computes the rows;
// an error when the selection leaves the operation no algorithm.
Result<std::vector<SweepRow>> run_sweep(const NcclTuner& tuner, const SweepOptions& o);
// nccl-tests' size syntax: a number with an optional K, M, G or T suffix
// (powers of 1024), e.g. "8", "64K", "8G".
Result<std::int64_t> parse_size(std::string_view flag, std::string_view text);

}  // namespace prism
