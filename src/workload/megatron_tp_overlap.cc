// Transformer Engine's userbuffers overlap of tensor-parallel communication
// with the GEMMs beside it (Megatron's --tp-comm-overlap, sequence parallel):
// TE's CommOverlapP2P (ring exchange) for the all-gathers before qkv and fc1
// forward and before proj and fc2 dgrad, CommOverlap "pipeline" for the
// reduce-scatters after proj and fc2 forward, and the "bulk" overlaps of a
// column-parallel layer's backward. Communication runs on the "tp" stream
// into buffers TE registered once (tp_comm_userbuffers, no allocation per
// use), as userbuffers transfers (Transport::kUserbuffers: no NCCL memory,
// no NCCL SMs); the GEMMs beside a communication kernel run on the SMs it
// leaves (Dims::ub_of, the job's tp_comm_overlap_cfg).
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
// to each rank's successor (a paired send and receive of one shard, on the
// copy engines: no SMs held).
void StageBuilder::ring_all_gather_gemm(std::int64_t m, std::int64_t n, std::int64_t k,
                                        std::string_view name, UbGemm g) {
  const std::int64_t rows = m / x_.t;
  const Ring ring{.stream = tp_stream(x_),
                  .next = slots_.tp_next,
                  .prev = slots_.tp_prev,
                  .bytes = ub_element_bytes(g) * rows * k,
                  .tag = kTagTpRing,
                  .begin = "tp_ring_begin",
                  .send = "tp_ring_send",
                  .recv = "tp_ring_recv",
                  .arrived = "tp_ring_chunk",
                  .transport = Transport::kUserbuffers};
  const int held = ub_held_sms(g);
  if (!x_.ub_of(g).aggregate) {
    ring_exchange(ring, static_cast<int>(x_.t),
                  [&](int) { kernel_beside(gemm(rows, n, k, x_.gemm_dtype), name, held); });
    return;
  }
  // aggregate: ranks first swap their shards in pairs, then a ring of
  // stride 2 passes pairs of shards; t / 2 steps, each GEMM on 2 m / t rows.
  record(kCompute, ring.begin);
  wait(ring.stream, ring.begin);
  pass_on(ring);
  record(ring.stream, "tp_ring_pair");
  wait(kCompute, "tp_ring_pair");
  Ring pairs = ring;
  pairs.bytes = 2 * ring.bytes;
  ring_exchange(pairs, static_cast<int>(x_.t / 2),
                [&](int) { kernel_beside(gemm(2 * rows, n, k, x_.gemm_dtype), name, held); });
}

void StageBuilder::gemm_reduce_scatter(std::int64_t m, std::int64_t n, std::int64_t k,
                                       std::string_view name, UbGemm g) {
  const UbGemmConfig& c = x_.ub_of(g);
  const std::uint16_t tp = tp_stream(x_);
  const std::int64_t e = ub_element_bytes(g);
  if (c.method == UbMethod::kPipeline) {
    // TE's split_overlap_rs: the GEMM in num_splits chunks of rows on the
    // SMs the reduce-scatter kernel leaves (num_sm), each chunk's partial
    // sums reduce-scattered while the next is computed.
    for (int i = 0; i < c.num_splits; ++i) {
      const std::int64_t begin = m * i / c.num_splits, end = m * (i + 1) / c.num_splits;
      kernel_beside(gemm(end - begin, n, k, x_.gemm_dtype), name, ub_held_sms(g));
      record(kCompute, "tp_rs_chunk");
      wait(tp, "tp_rs_chunk");
      b_.set_transport(collective(CollectiveKind::kReduceScatter, tp, slots_.tp,
                                  e * (end - begin) * n, "tp_reduce_scatter"),
                       Transport::kUserbuffers);
    }
    record(tp, "tp_rs_done");
    wait(kCompute, "tp_rs_done");
    return;
  }
  // TE's split_overlap_rs_p2p: t steps; step i computes the partial sums of
  // one rank's m / t rows and, while step i + 1 computes, sends them on
  // (copy engines); the rank's own chunk comes last, and one kernel sums it
  // with the t - 1 received (reading t chunks, writing the bf16 output).
  const std::int64_t rows = m / x_.t;
  const Ring ring{.stream = tp,
                  .next = slots_.tp_next,
                  .prev = slots_.tp_prev,
                  .bytes = e * rows * n,
                  .tag = kTagTpRing,
                  .begin = {},  // one pass_on per step, no ring_exchange
                  .send = "tp_rs_send",
                  .recv = "tp_rs_recv",
                  .arrived = {},
                  .transport = Transport::kUserbuffers};
  for (std::int64_t i = 0; i < x_.t; ++i) {
    kernel_beside(gemm(rows, n, k, x_.gemm_dtype), name, ub_held_sms(g));
    if (i + 1 < x_.t) {
      record(kCompute, "tp_rs_chunk");
      wait(tp, "tp_rs_chunk");
      pass_on(ring);
    }
  }
  record(tp, "tp_rs_done");
  wait(kCompute, "tp_rs_done");
  mem("tp_rs_reduce", x_.t * ring.bytes + kBf16 * rows * n);
}

void StageBuilder::bulk_overlap(CollectiveKind kind, std::int64_t bytes, const Kernel& g,
                                std::string_view name, int comm_sms) {
  const std::uint16_t tp = tp_stream(x_);
  record(kCompute, "tp_bulk_begin");
  wait(tp, "tp_bulk_begin");
  b_.set_transport(
      collective(kind, tp, slots_.tp, bytes,
                 kind == CollectiveKind::kAllGather ? "tp_all_gather" : "tp_reduce_scatter"),
      Transport::kUserbuffers);
  record(tp, "tp_bulk_done");
  kernel_beside(g, name, comm_sms);
  wait(kCompute, "tp_bulk_done");
}

// Y[m,n] = X[m,k] W[k,n] backward: dX = dY W^T (m, k, n) beside the
// all-gather of X that the weight gradient dW = X^T dY (k, n, m) needs, then
// dW beside the reduce-scatter of dX (TE's ub_bulk_dgrad / ub_bulk_wgrad).
int StageBuilder::column_parallel_backward(std::string_view layer, std::int64_t m, std::int64_t n,
                                           std::int64_t k, UbGemm dgrad_ub, UbGemm wgrad_ub,
                                           int grad_output) {
  const int gathered = x_.ub_bulk_dgrad ? -1 : gathered_input(fmt::format("{}_input", layer));
  const int grad_input =
      alloc(kBf16 * (x_.ub_bulk_wgrad ? m / x_.t : m) * k, fmt::format("grad.{}_input", layer));
  const std::string dgrad = fmt::format("{}_dgrad", layer), wgrad = fmt::format("{}_wgrad", layer);
  const Kernel dx = gemm(m, k, n, x_.gemm_dtype), dw = wgrad_gemm(k, n, m, x_.gemm_dtype);
  const std::int64_t bytes = kBf16 * m * k;  // X and dX, full sequence
  if (x_.ub_bulk_dgrad) {
    bulk_overlap(CollectiveKind::kAllGather, ub_element_bytes(dgrad_ub) * m * k, dx, dgrad,
                 ub_held_sms(dgrad_ub));
  } else {
    kernel(dx, dgrad);
    collective(CollectiveKind::kAllGather, kCompute, slots_.tp, bytes, "tp_all_gather");
  }
  if (x_.ub_bulk_wgrad) {
    bulk_overlap(CollectiveKind::kReduceScatter, bytes, dw, wgrad, ub_held_sms(wgrad_ub));
  } else {
    kernel(dw, wgrad);
    collective(CollectiveKind::kReduceScatter, kCompute, slots_.tp, bytes, "tp_reduce_scatter");
  }
  free(grad_output);
  free_transient(gathered);
  return grad_input;
}

}  // namespace prism::megatron
