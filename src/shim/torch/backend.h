// PrismBackend: the c10d backend "prism". One instance per process group;
// each is a communicator of the coordinator (prism_comm_init with the
// group's global ranks). Every call becomes one prism_op on stream 1
// ("comm"), entered without waiting, in the graph's byte convention
// (docs/graph-format.md: the size NCCL is called with, per rank):
//   all_reduce, broadcast, reduce   the tensors' bytes
//   all_gather                      the output: input bytes × group size
//   reduce_scatter                  the input: output bytes × group size
//   all_to_all                      the input's bytes
//   send, recv                      the tensor's bytes; peer = group rank
//   barrier                         0 bytes
//   gather, scatter                 the sends and recvs NCCL would issue,
//                                   as one group (prism_op.group)
// Several tensors in one call (coalesced) are one op of their summed bytes.
//
// Torch 1.x: a c10d::ProcessGroup subclass, returned to Python as the group
// itself. Torch 2.x: a c10d::Backend, which torch wraps in a ProcessGroup.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <torch/version.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#endif

#include "prism/client.h"
#include "shim/torch/work.h"

namespace prism::torch_shim {

#if TORCH_VERSION_MAJOR >= 2
using BackendBase = c10d::Backend;
#else
using BackendBase = c10d::ProcessGroup;
#endif

class PrismBackend final : public BackendBase {
 public:
  // comm: the Session's handle for this group.
  PrismBackend(int rank, int size, std::uint32_t comm);

  const std::string getBackendName() const override { return "prism"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& output_lists, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
#if TORCH_VERSION_MAJOR >= 2
  // One all_gather per pair, as ProcessGroupNCCL issues them in one
  // ncclGroupStart/End: a single pair is one op, several share a group.
  // What functional collectives (DTensor, FSDP2) call.
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
#endif
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<std::int64_t>& output_splits,
                                               std::vector<std::int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;
#if TORCH_VERSION_MAJOR >= 2
  // NCCL-style coalescing (batch_isend_irecv, _coalescing_manager with a
  // device): the calls between start and end are held, then entered at
  // endCoalescing as one group (one prism_op.group), as ProcessGroupNCCL
  // issues them in one ncclGroupStart/End. Without it, the sends and
  // receives of two pipeline stages, each serialized on its comm stream,
  // can wait on each other (1F1B's steady state does). The works of the
  // held calls complete with the group; endCoalescing returns the group's.
  bool supportsCoalescing() const override {
    return true;
  }
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
#endif
  void setSequenceNumberForGroup() override {
    sequence_ = 0;
  }
  uint64_t getSequenceNumberForGroup() override {
    return sequence_;
  }

 private:
  // What one call becomes: its ops, the tensors its future carries, and
  // its effect on this rank's data once they complete.
  struct Call {
    const char* name;
    c10d::OpType type;
    std::vector<prism_op> ops;
    std::vector<at::Tensor> outputs;
    std::function<void()> effect;
  };
  prism_op op(prism_op_code code, prism_dtype dtype, std::int64_t bytes, int peer = 0, int tag = 0,
              std::uint32_t group = 0) const;
  c10::intrusive_ptr<c10d::Work> launch(Call call);
  // allreduce and allreduce_coalesced: one all_reduce op of the tensors.
  c10::intrusive_ptr<c10d::Work> launch_all_reduce(const char* name, c10d::OpType type,
                                                   const std::vector<at::Tensor>& tensors,
                                                   const c10d::ReduceOp& reduce_op);
  void check_rank(std::int64_t r, const char* call, const char* what) const;

  std::uint32_t comm_;
  std::uint64_t sequence_ = 0;
  // Between startCoalescing and endCoalescing: the calls held, each with
  // its work.
  bool coalescing_ = false;
  std::vector<std::pair<Call, c10::intrusive_ptr<PrismWork>>> held_;
};

}  // namespace prism::torch_shim
