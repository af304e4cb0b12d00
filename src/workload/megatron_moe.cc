// The MoE block of StageBuilder (workload/megatron_stage.h): router, token
// permutation, Megatron-Core's alltoall dispatcher over EP (and the ETP
// gather), the routed experts' grouped GEMMs and the shared expert.
#include <vector>

#include "workload/megatron_stage.h"

namespace prism::megatron {

// The routed experts' tokens: permuted (one copy per top-k choice),
// dispatched over EP and gathered over ETP into the experts' input. Returns
// the transients the caller frees after the residual add.
std::vector<int> StageBuilder::moe_forward() {
  const std::int64_t routed = kBf16 * x_.Tsp * x_.topk * x_.h;
  // The router stays in bf16 under fp8 training (Transformer Engine's fp8
  // covers the linear layers only).
  save("router_logits");
  kernel(gemm(x_.Tsp, x_.experts, x_.h), "router_fwd");
  mem("router_topk_fwd", kFp32 * x_.Tsp * x_.experts * 2);
  const bool moved = x_.ep > 1 || x_.etp_gather > 1;
  const int permuted = moved ? alloc(routed, "permuted_tokens") : -1;
  // Under fp8 the experts' grouped linear keeps only its FP8 copy
  // (expert_input); the bf16 tokens it quantizes are a transient, held here
  // until the expert MLP's forward is done.
  const std::int64_t tokens = x_.moe_tokens * x_.local_experts;
  int dispatched = -1;
  if (!moved) {
    if (x_.fp8) dispatched = alloc(kBf16 * tokens * x_.h, "dispatched_tokens");
    save("expert_input");
  }
  mem("permute_fwd", 2 * routed);
  if (moved) {
    if (x_.fp8) dispatched = alloc(kBf16 * tokens * x_.h, "dispatched_tokens");
    save("expert_input");
  }
  if (x_.ep > 1) collective(CollectiveKind::kAllToAll, kCompute, slots_.ep, routed, "ep_dispatch");
  if (x_.etp_gather > 1)
    collective(CollectiveKind::kAllGather, kCompute, slots_.etp, routed * x_.etp_gather,
               "etp_all_gather");
  free_transient(permuted);
  const int expert_out = mlp_forward(expert_mlp());
  free_transient(dispatched);
  if (x_.etp_gather > 1)
    collective(CollectiveKind::kReduceScatter, kCompute, slots_.etp, routed * x_.etp_gather,
               "etp_reduce_scatter");
  if (x_.ep > 1) collective(CollectiveKind::kAllToAll, kCompute, slots_.ep, routed, "ep_combine");
  std::vector<int> later = {alloc(kBf16 * x_.Tsp * x_.h, "moe_output")};
  mem("unpermute_fwd", 2 * routed);
  free(expert_out);
  if (x_.shared_f_in > 0) {
    const int shared_out = mlp_forward(shared_mlp());
    if (shared_out >= 0) later.push_back(shared_out);
  }
  return later;
}

// Returns the input gradients the caller frees after the norm's backward.
std::vector<int> StageBuilder::moe_backward() {
  const std::int64_t routed = kBf16 * x_.Tsp * x_.topk * x_.h;
  const TrainingSpec& tr = job_.training;
  const bool whole = tr.recomputes(RecomputeModule::kMoe);
  rerun([&] {
    // layernorm: the discarded pre-MLP norm output is made again as the
    // block's backward begins (the hook on the MoE output's gradient).
    if (tr.recomputes(RecomputeModule::kLayernorm)) {
      save("router_input");
      mem("norm_fwd", 2 * kBf16 * x_.Tsp * x_.h);
    }
    // moe: the checkpointed MoE layer runs its whole forward again (router,
    // dispatch, experts, combine, shared expert), which covers moe_act and
    // shared_experts; its output nothing reads.
    if (whole) {
      for (const int op : moe_forward()) free_transient(op);
    } else if (x_.shared_f_in > 0 && tr.recomputes(RecomputeModule::kSharedExperts)) {
      // shared_experts: the checkpointed shared expert runs its forward again.
      free_transient(mlp_forward(shared_mlp()));
    }
  });
  std::vector<int> grads;
  if (x_.shared_f_in > 0) {
    grads.push_back(mlp_backward(shared_mlp(), -1));
  }
  // The gradient of the experts' output, unpermuted back to them.
  const int grad_out =
      alloc(kBf16 * x_.moe_tokens * x_.local_experts * x_.h, "grad.expert_fc2_output");
  mem("unpermute_bwd", 2 * routed);
  if (x_.ep > 1)
    collective(CollectiveKind::kAllToAll, kCompute, slots_.ep, routed, "ep_combine_bwd");
  if (x_.etp_gather > 1)
    collective(CollectiveKind::kAllGather, kCompute, slots_.etp, routed * x_.etp_gather,
               "etp_all_gather");
  // moe_act: the experts' activation runs again on the kept FC1 output.
  if (tr.recomputes(RecomputeModule::kMoeAct) && !whole)
    rerun([&] { recompute_activation(expert_mlp()); });
  const int grad_in = mlp_backward(expert_mlp(), grad_out);
  if (x_.etp_gather > 1)
    collective(CollectiveKind::kReduceScatter, kCompute, slots_.etp, routed * x_.etp_gather,
               "etp_reduce_scatter");
  if (x_.ep > 1)
    collective(CollectiveKind::kAllToAll, kCompute, slots_.ep, routed, "ep_dispatch_bwd");
  const int grad_router_in = alloc(kBf16 * x_.Tsp * x_.h, "grad.router_input");
  mem("permute_bwd", 2 * routed);
  free(grad_in);
  mem("router_topk_bwd", kFp32 * x_.Tsp * x_.experts * 2);
  release("router_logits");
  kernel(gemm(x_.Tsp, x_.h, x_.experts), "router_dgrad");
  kernel(gemm(x_.h, x_.experts, x_.Tsp), "router_wgrad");
  release("router_input");
  grads.push_back(grad_router_in);
  return grads;
}

}  // namespace prism::megatron
