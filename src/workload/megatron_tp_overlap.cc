// Transformer Engine's userbuffers overlap of tensor-parallel communication
// with the GEMMs beside it (Megatron's --tp-comm-overlap, sequence parallel):
// TE's CommOverlapP2P (ring exchange) for the all-gathers before qkv and fc1
// forward and before proj and fc2 dgrad, CommOverlap "pipeline" for the
// reduce-scatters after proj and fc2 forward, and the "bulk" overlaps of a
// column-parallel layer's backward. Communication runs on the "tp" stream
// into buffers TE registered once (tp_comm_userbuffers, no allocation per
// use); the GEMMs beside a communication kernel run on the SMs it leaves.
// docs/simulate.md, "TP communication overlap", lists the sources.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "workload/megatron_stage.h"

namespace prism::megatron {

void StageBuilder::kernel_beside(const Kernel& k, std::string_view name, int comm_sms) {
  const SimTime alone = kernel_time(k);
  const std::int64_t sms = km_.gpu().num_sms;
  const std::int64_t left = std::max<std::int64_t>(1, sms - comm_sms);
  b_.compute(kCompute, SimTime{(alone.ns * sms + left - 1) / left}, name);
}

// TE's split_overlap_ag_p2p (aggregate off): t steps; in step i the GEMM
// multiplies the i-th chunk of m / t rows while the ring passes the next one
// to each rank's successor (a paired send and receive of one shard).
void StageBuilder::ring_all_gather_gemm(std::int64_t m, std::int64_t n, std::int64_t k,
                                        std::string_view name) {
  const std::int64_t rows = m / x_.t;
  const Ring ring{.stream = tp_stream(x_),
                  .next = slots_.tp_next,
                  .prev = slots_.tp_prev,
                  .bytes = kBf16 * rows * k,
                  .tag = kTagTpRing,
                  .begin = "tp_ring_begin",
                  .send = "tp_ring_send",
                  .recv = "tp_ring_recv",
                  .arrived = "tp_ring_chunk"};
  ring_exchange(ring, static_cast<int>(x_.t),
                [&](int) { kernel(gemm(rows, n, k, x_.gemm_dtype), name); });
}

// TE's split_overlap_rs (pipeline): the GEMM in kPipelineSplits chunks of
// rows on the SMs the reduce-scatter kernel leaves (set_sm_margin), each
// chunk's partial sums reduce-scattered while the next is computed.
void StageBuilder::gemm_pipelined_reduce_scatter(std::int64_t m, std::int64_t n, std::int64_t k,
                                                 std::string_view name, int comm_sms) {
  const std::uint16_t tp = tp_stream(x_);
  for (int i = 0; i < kPipelineSplits; ++i) {
    const std::int64_t begin = m * i / kPipelineSplits, end = m * (i + 1) / kPipelineSplits;
    kernel_beside(gemm(end - begin, n, k, x_.gemm_dtype), name, comm_sms);
    record(kCompute, "tp_rs_chunk");
    wait(tp, "tp_rs_chunk");
    collective(CollectiveKind::kReduceScatter, tp, slots_.tp, kBf16 * (end - begin) * n,
               "tp_reduce_scatter");
  }
  record(tp, "tp_rs_done");
  wait(kCompute, "tp_rs_done");
}

void StageBuilder::bulk_overlap(CollectiveKind kind, std::int64_t bytes, const Kernel& g,
                                std::string_view name, int comm_sms) {
  const std::uint16_t tp = tp_stream(x_);
  record(kCompute, "tp_bulk_begin");
  wait(tp, "tp_bulk_begin");
  collective(kind, tp, slots_.tp, bytes,
             kind == CollectiveKind::kAllGather ? "tp_all_gather" : "tp_reduce_scatter");
  record(tp, "tp_bulk_done");
  kernel_beside(g, name, comm_sms);
  wait(kCompute, "tp_bulk_done");
}

// Y[m,n] = X[m,k] W[k,n] backward: dX = dY W^T (m, k, n) beside the
// all-gather of X that the weight gradient dW = X^T dY (k, n, m) needs, then
// dW beside the reduce-scatter of dX (TE's ub_bulk_dgrad / ub_bulk_wgrad).
int StageBuilder::column_parallel_backward(std::string_view layer, std::int64_t m, std::int64_t n,
                                           std::int64_t k, int dgrad_sms, int wgrad_sms,
                                           int grad_output) {
  const int gathered = x_.ub_bulk_dgrad ? -1 : gathered_input(fmt::format("{}_input", layer));
  const int grad_input =
      alloc(kBf16 * (x_.ub_bulk_wgrad ? m / x_.t : m) * k, fmt::format("grad.{}_input", layer));
  const std::string dgrad = fmt::format("{}_dgrad", layer), wgrad = fmt::format("{}_wgrad", layer);
  const Kernel dx = gemm(m, k, n, x_.gemm_dtype), dw = wgrad_gemm(k, n, m, x_.gemm_dtype);
  const std::int64_t bytes = kBf16 * m * k;  // X and dX, full sequence
  if (x_.ub_bulk_dgrad) {
    bulk_overlap(CollectiveKind::kAllGather, bytes, dx, dgrad, dgrad_sms);
  } else {
    kernel(dx, dgrad);
    collective(CollectiveKind::kAllGather, kCompute, slots_.tp, bytes, "tp_all_gather");
  }
  if (x_.ub_bulk_wgrad) {
    bulk_overlap(CollectiveKind::kReduceScatter, bytes, dw, wgrad, wgrad_sms);
  } else {
    kernel(dw, wgrad);
    collective(CollectiveKind::kReduceScatter, kCompute, slots_.tp, bytes, "tp_reduce_scatter");
  }
  free(grad_output);
  free_transient(gathered);
  return grad_input;
}

}  // namespace prism::megatron
