#include "shim/torch/backend.h"

#include <functional>
#include <string>
#include <utility>

#include <c10/util/Exception.h>

#include "shim/torch/op_mapping.h"
#include "shim/torch/session.h"
#include "shim/torch/work.h"

namespace prism::torch_shim {

namespace {

using c10d::OpType;
using Work = c10::intrusive_ptr<c10d::Work>;
using TensorLists = std::vector<std::vector<at::Tensor>>;

// The stream every op of the backend runs on: the graph's "comm" stream.
constexpr std::uint16_t kCommStream = 1;

// The effect of an all-reduce (or a reduce at its root) on each tensor.
std::function<void()> reduce_each(const std::vector<at::Tensor>& tensors, const c10d::ReduceOp& op,
                                  int group_size) {
  return [tensors, op, group_size] {
    for (const at::Tensor& t : tensors) reduce_identical(t, op, group_size);
  };
}

std::vector<at::Tensor> flatten(const TensorLists& lists) {
  std::vector<at::Tensor> out;
  for (const auto& l : lists) out.insert(out.end(), l.begin(), l.end());
  return out;
}

}  // namespace

PrismBackend::PrismBackend(int rank, int size, std::uint32_t comm)
    : BackendBase(rank, size), comm_(comm) {
  init();
}

prism_op PrismBackend::op(prism_op_code code, prism_dtype dtype, std::int64_t bytes, int peer,
                          int tag, std::uint32_t group) const {
  prism_op o{};
  o.comm = comm_;
  o.stream = kCommStream;
  o.code = static_cast<std::uint8_t>(code);
  o.dtype = static_cast<std::uint8_t>(dtype);
  o.bytes = bytes;
  o.peer = peer;
  o.tag = tag;
  o.group = group;
  return o;
}

void PrismBackend::check_rank(std::int64_t r, const char* call, const char* what) const {
  TORCH_CHECK(r >= 0 && r < size_, "prism: ", call, ": ", what, " ", r,
              " is not a rank of this process group of ", size_);
}

Work PrismBackend::launch(Call call) {
  ++sequence_;
  std::int64_t bytes = 0;
  for (const prism_op& o : call.ops) bytes += o.bytes;
  const std::string what = std::string(call.name) + " of " + std::to_string(bytes) +
                           " bytes on process group " + std::to_string(comm_);
  auto work =
      c10::make_intrusive<PrismWork>(rank_, call.type, what, call.outputs, std::move(call.effect));
  if (coalescing_) {
    held_.emplace_back(std::move(call), work);
    return work;
  }
  // The Session keeps the work alive until its ops complete, even when the
  // caller drops it (an async op nobody waits for).
  const std::uint64_t id = Session::get().enter(
      call.ops, what, [work](const std::string& error) { work->complete(error); });
  work->set_entry(id);
  return work;
}

#if TORCH_VERSION_MAJOR >= 2
void PrismBackend::startCoalescing() {
  TORCH_CHECK(!coalescing_, "prism: startCoalescing on process group ", comm_, " of rank ", rank_,
              ": already coalescing");
  coalescing_ = true;
  held_.clear();
}

Work PrismBackend::endCoalescing() {
  TORCH_CHECK(coalescing_, "prism: endCoalescing on process group ", comm_, " of rank ", rank_,
              " without startCoalescing");
  coalescing_ = false;
  auto held = std::move(held_);
  held_.clear();
  std::vector<prism_op> ops;
  std::vector<at::Tensor> outputs;
  std::int64_t bytes = 0;
  for (const auto& [call, work] : held) {
    for (const prism_op& o : call.ops) {
      ops.push_back(o);
      bytes += o.bytes;
    }
    outputs.insert(outputs.end(), call.outputs.begin(), call.outputs.end());
  }
  // One op is entered as it is; several are one group.
  if (ops.size() > 1) {
    const std::uint32_t group = Session::get().new_group_id();
    for (prism_op& o : ops) o.group = group;
  }
  const std::string what = "coalesced " + std::to_string(held.size()) + " calls of " +
                           std::to_string(bytes) + " bytes on process group " +
                           std::to_string(comm_);
  auto work =
      c10::make_intrusive<PrismWork>(rank_, OpType::COALESCED, what, std::move(outputs), nullptr);
  std::vector<c10::intrusive_ptr<PrismWork>> works;
  for (auto& entry : held) works.push_back(entry.second);
  const std::uint64_t id = Session::get().enter(ops, what, [works, work](const std::string& error) {
    for (const auto& w : works) w->complete(error);
    work->complete(error);
  });
  for (const auto& w : works) w->set_entry(id);
  work->set_entry(id);
  return work;
}
#endif

Work PrismBackend::broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  const Payload p = payload_of(tensors, "broadcast");
  check_rank(opts.rootRank, "broadcast", "root");
  // Data from another root is what this rank already holds (symmetry).
  return launch({"broadcast",
                 OpType::BROADCAST,
                 {op(PRISM_BROADCAST, p.dtype, p.bytes, static_cast<int>(opts.rootRank))},
                 tensors,
                 {}});
}

Work PrismBackend::launch_all_reduce(const char* name, OpType type,
                                     const std::vector<at::Tensor>& tensors,
                                     const c10d::ReduceOp& reduce_op) {
  const Payload p = payload_of(tensors, name);
  check_reduce_op(reduce_op, name);
  return launch({name,
                 type,
                 {op(PRISM_ALL_REDUCE, p.dtype, p.bytes)},
                 tensors,
                 reduce_each(tensors, reduce_op, size_)});
}

Work PrismBackend::allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  return launch_all_reduce("allreduce", OpType::ALLREDUCE, tensors, opts.reduceOp);
}

Work PrismBackend::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                       const c10d::AllreduceCoalescedOptions& opts) {
  return launch_all_reduce("allreduce_coalesced", OpType::ALLREDUCE_COALESCED, tensors,
                           opts.reduceOp);
}

Work PrismBackend::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  const Payload p = payload_of(tensors, "reduce");
  check_reduce_op(opts.reduceOp, "reduce");
  check_rank(opts.rootRank, "reduce", "root");
  return launch({"reduce",
                 OpType::REDUCE,
                 {op(PRISM_REDUCE, p.dtype, p.bytes, static_cast<int>(opts.rootRank))},
                 tensors,
                 opts.rootRank == rank_ ? reduce_each(tensors, opts.reduceOp, size_) : nullptr});
}

Work PrismBackend::allgather(TensorLists& outputs, std::vector<at::Tensor>& inputs,
                             const c10d::AllgatherOptions&) {
  const Payload p = payload_of(inputs, "allgather");
  TORCH_CHECK(outputs.size() == inputs.size(), "prism: allgather: ", outputs.size(),
              " output lists for ", inputs.size(), " inputs");
  for (const auto& l : outputs) {
    TORCH_CHECK(static_cast<int>(l.size()) == size_, "prism: allgather: an output list of ",
                l.size(), " tensors in a group of ", size_);
  }
  return launch({"allgather",
                 OpType::ALLGATHER,
                 {op(PRISM_ALL_GATHER, p.dtype, p.bytes * size_)},
                 flatten(outputs),
                 [outputs, inputs] {
                   for (std::size_t i = 0; i < inputs.size(); ++i)
                     fill_slots(outputs[i], inputs[i]);
                 }});
}

Work PrismBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                   const c10d::AllgatherOptions&) {
  const Payload p = payload_of(input, "_allgather_base");
  TORCH_CHECK(output.numel() == input.numel() * size_, "prism: _allgather_base: output of ",
              output.numel(), " elements for an input of ", input.numel(), " in a group of ",
              size_);
  return launch({"_allgather_base",
                 OpType::_ALLGATHER_BASE,
                 {op(PRISM_ALL_GATHER, p.dtype, bytes_of(output))},
                 {output},
                 [output, input, n = size_] {
                   fill_slots(output.view({n, -1}).unbind(0), input.reshape({-1}));
                 }});
}

Work PrismBackend::allgather_coalesced(TensorLists& output_lists, std::vector<at::Tensor>& inputs,
                                       const c10d::AllgatherOptions&) {
  const Payload p = payload_of(inputs, "allgather_coalesced");
  TORCH_CHECK(static_cast<int>(output_lists.size()) == size_,
              "prism: allgather_coalesced: ", output_lists.size(), " output lists in a group of ",
              size_);
  for (const auto& l : output_lists) {
    TORCH_CHECK(l.size() == inputs.size(), "prism: allgather_coalesced: an output list of ",
                l.size(), " tensors for ", inputs.size(), " inputs");
  }
  return launch({"allgather_coalesced",
                 OpType::ALLGATHER_COALESCED,
                 {op(PRISM_ALL_GATHER, p.dtype, p.bytes * size_)},
                 flatten(output_lists),
                 [output_lists, inputs] {
                   for (const auto& l : output_lists) {
                     for (std::size_t i = 0; i < inputs.size(); ++i) fill_slots({l[i]}, inputs[i]);
                   }
                 }});
}

#if TORCH_VERSION_MAJOR >= 2
Work PrismBackend::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                   std::vector<at::Tensor>& inputs,
                                                   const c10d::AllgatherOptions&) {
  const char* name = "allgather_into_tensor_coalesced";
  TORCH_CHECK(outputs.size() == inputs.size() && !inputs.empty(), "prism: ", name, ": ",
              outputs.size(), " outputs for ", inputs.size(), " inputs");
  const std::uint32_t group = inputs.size() > 1 ? Session::get().new_group_id() : 0;
  Call call{name, OpType::COALESCED, {}, outputs, {}};
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Payload p = payload_of(inputs[i], name);
    TORCH_CHECK(outputs[i].numel() == inputs[i].numel() * size_, "prism: ", name, ": output ", i,
                " of ", outputs[i].numel(), " elements for an input of ", inputs[i].numel(),
                " in a group of ", size_);
    call.ops.push_back(op(PRISM_ALL_GATHER, p.dtype, bytes_of(outputs[i]), 0, 0, group));
  }
  call.effect = [outputs, inputs, n = size_] {
    for (std::size_t i = 0; i < inputs.size(); ++i)
      fill_slots(outputs[i].view({n, -1}).unbind(0), inputs[i].reshape({-1}));
  };
  return launch(std::move(call));
}

Work PrismBackend::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                   std::vector<at::Tensor>& inputs,
                                                   const c10d::ReduceScatterOptions& opts) {
  const char* name = "reduce_scatter_tensor_coalesced";
  check_reduce_op(opts.reduceOp, name);
  TORCH_CHECK(outputs.size() == inputs.size() && !inputs.empty(), "prism: ", name, ": ",
              outputs.size(), " outputs for ", inputs.size(), " inputs");
  const std::uint32_t group = inputs.size() > 1 ? Session::get().new_group_id() : 0;
  Call call{name, OpType::COALESCED, {}, outputs, {}};
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Payload p = payload_of(inputs[i], name);
    TORCH_CHECK(inputs[i].numel() == outputs[i].numel() * size_, "prism: ", name, ": input ", i,
                " of ", inputs[i].numel(), " elements for an output of ", outputs[i].numel(),
                " in a group of ", size_);
    call.ops.push_back(op(PRISM_REDUCE_SCATTER, p.dtype, p.bytes, 0, 0, group));
  }
  call.effect = [outputs, inputs, me = rank_, r = opts.reduceOp, n = size_] {
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      fill_slots({outputs[i]}, inputs[i].reshape({n, -1})[me]);
      reduce_identical(outputs[i], r, n);
    }
  };
  return launch(std::move(call));
}
#endif

// NCCL has no gather: ProcessGroupNCCL issues one send per non-root rank and
// the root's receives, in one group. The graph of a captured NCCL program
// has those, so the emulation enters the same.
Work PrismBackend::gather(TensorLists& outputs, std::vector<at::Tensor>& inputs,
                          const c10d::GatherOptions& opts) {
  TORCH_CHECK(inputs.size() == 1, "prism: gather: one input tensor expected, got ", inputs.size());
  const Payload p = payload_of(inputs, "gather");
  check_rank(opts.rootRank, "gather", "root");
  const auto root = static_cast<int>(opts.rootRank);
  const std::uint32_t group = Session::get().new_group_id();
  Call call{"gather", OpType::GATHER, {}, {}, {}};
  if (rank_ != root) {
    call.ops.push_back(op(PRISM_SEND, p.dtype, p.bytes, root, 0, group));
    return launch(std::move(call));
  }
  TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
              "prism: gather: the root needs one list of ", size_, " output tensors");
  for (int r = 0; r < size_; ++r) {
    if (r != root) call.ops.push_back(op(PRISM_RECV, p.dtype, p.bytes, r, 0, group));
  }
  call.outputs = outputs[0];
  call.effect = [slots = outputs[0], input = inputs[0]] { fill_slots(slots, input); };
  return launch(std::move(call));
}

Work PrismBackend::scatter(std::vector<at::Tensor>& outputs, TensorLists& inputs,
                           const c10d::ScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == 1, "prism: scatter: one output tensor expected, got ",
              outputs.size());
  const Payload p = payload_of(outputs, "scatter");
  check_rank(opts.rootRank, "scatter", "root");
  const auto root = static_cast<int>(opts.rootRank);
  const std::uint32_t group = Session::get().new_group_id();
  Call call{"scatter", OpType::SCATTER, {}, outputs, {}};
  if (rank_ != root) {
    call.ops.push_back(op(PRISM_RECV, p.dtype, p.bytes, root, 0, group));
    return launch(std::move(call));
  }
  TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
              "prism: scatter: the root needs one list of ", size_, " input tensors");
  for (int r = 0; r < size_; ++r) {
    if (r != root) call.ops.push_back(op(PRISM_SEND, p.dtype, bytes_of(inputs[0][r]), r, 0, group));
  }
  call.effect = [out = outputs[0], mine = inputs[0][root]] { fill_slots({out}, mine); };
  return launch(std::move(call));
}

Work PrismBackend::reduce_scatter(std::vector<at::Tensor>& outputs, TensorLists& inputs,
                                  const c10d::ReduceScatterOptions& opts) {
  const Payload p = payload_of(outputs, "reduce_scatter");
  check_reduce_op(opts.reduceOp, "reduce_scatter");
  TORCH_CHECK(outputs.size() == inputs.size(), "prism: reduce_scatter: ", outputs.size(),
              " outputs for ", inputs.size(), " input lists");
  for (const auto& l : inputs) {
    TORCH_CHECK(static_cast<int>(l.size()) == size_, "prism: reduce_scatter: an input list of ",
                l.size(), " tensors in a group of ", size_);
  }
  return launch({"reduce_scatter",
                 OpType::REDUCE_SCATTER,
                 {op(PRISM_REDUCE_SCATTER, p.dtype, p.bytes * size_)},
                 outputs,
                 [outputs, inputs, me = rank_, r = opts.reduceOp, n = size_] {
                   for (std::size_t i = 0; i < outputs.size(); ++i) {
                     fill_slots({outputs[i]}, inputs[i][me]);
                     reduce_identical(outputs[i], r, n);
                   }
                 }});
}

Work PrismBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                        const c10d::ReduceScatterOptions& opts) {
  const Payload p = payload_of(input, "_reduce_scatter_base");
  check_reduce_op(opts.reduceOp, "_reduce_scatter_base");
  TORCH_CHECK(input.numel() == output.numel() * size_, "prism: _reduce_scatter_base: input of ",
              input.numel(), " elements for an output of ", output.numel(), " in a group of ",
              size_);
  return launch({"_reduce_scatter_base",
                 OpType::_REDUCE_SCATTER_BASE,
                 {op(PRISM_REDUCE_SCATTER, p.dtype, p.bytes)},
                 {output},
                 [output, input, me = rank_, r = opts.reduceOp, n = size_] {
                   fill_slots({output}, input.reshape({n, -1})[me]);
                   reduce_identical(output, r, n);
                 }});
}

Work PrismBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                 std::vector<std::int64_t>& output_splits,
                                 std::vector<std::int64_t>& input_splits,
                                 const c10d::AllToAllOptions&) {
  const Payload p = payload_of(input, "alltoall_base");
  // As ProcessGroupNCCL and Gloo check: a tensor is cut exactly by its
  // split sizes, or evenly among the group without them.
  const std::pair<const std::vector<std::int64_t>*, const at::Tensor*> sides[] = {
      {&output_splits, &output}, {&input_splits, &input}};
  for (const auto& [splits, tensor] : sides) {
    const char* side = splits == &output_splits ? "output" : "input";
    const std::int64_t rows = tensor->dim() == 0 ? 1 : tensor->size(0);
    if (splits->empty()) {
      TORCH_CHECK(rows % size_ == 0, "prism: alltoall_base: the ", side, " tensor's ", rows,
                  " rows do not split evenly among ", size_, " ranks");
      continue;
    }
    TORCH_CHECK(static_cast<int>(splits->size()) == size_, "prism: alltoall_base: ", splits->size(),
                " ", side, " split sizes in a group of ", size_);
    std::int64_t sum = 0;
    for (const std::int64_t n : *splits) {
      TORCH_CHECK(n >= 0, "prism: alltoall_base: ", side, " split size ", n, " is negative");
      sum += n;
    }
    TORCH_CHECK(sum == rows, "prism: alltoall_base: ", side, " split sizes add up to ", sum,
                " rows, the tensor has ", rows);
  }
  return launch({"alltoall_base",
                 OpType::ALLTOALL_BASE,
                 {op(PRISM_ALL_TO_ALL, p.dtype, p.bytes)},
                 {output},
                 [output, input, output_splits, input_splits, n = size_] {
                   copy_chunks(output, input, output_splits, input_splits, n);
                 }});
}

Work PrismBackend::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                            const c10d::AllToAllOptions&) {
  const Payload p = payload_of(inputs, "alltoall");
  TORCH_CHECK(static_cast<int>(outputs.size()) == size_ && static_cast<int>(inputs.size()) == size_,
              "prism: alltoall: ", inputs.size(), " inputs and ", outputs.size(),
              " outputs in a group of ", size_);
  return launch({"alltoall",
                 OpType::ALLTOALL,
                 {op(PRISM_ALL_TO_ALL, p.dtype, p.bytes)},
                 outputs,
                 [outputs, inputs] {
                   for (std::size_t j = 0; j < outputs.size(); ++j) {
                     if (outputs[j].numel() == inputs[j].numel())
                       fill_slots({outputs[j]}, inputs[j]);
                   }
                 }});
}

Work PrismBackend::send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) {
  const Payload p = payload_of(tensors, "send");
  check_rank(dst_rank, "send", "destination");
  return launch(
      {"send", OpType::SEND, {op(PRISM_SEND, p.dtype, p.bytes, dst_rank, tag)}, tensors, {}});
}

Work PrismBackend::recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) {
  const Payload p = payload_of(tensors, "recv");
  check_rank(src_rank, "recv", "source");
  // What the peer sends is not carried: the buffer is zeroed, never left
  // as torch.empty's memory (NaN included) for the program to compute on.
  return launch(
      {"recv", OpType::RECV, {op(PRISM_RECV, p.dtype, p.bytes, src_rank, tag)}, tensors, [tensors] {
         fill_zeros(tensors);
       }});
}

Work PrismBackend::recvAnysource(std::vector<at::Tensor>&, int) {
  TORCH_CHECK(false,
              "prism: recv from any source cannot be emulated: the coordinator matches a receive "
              "by its peer; pass src= to dist.recv / dist.irecv");
}

// A barrier carries no data; bf16 is the graph format's default dtype, which
// a barrier in a graph has unless it says otherwise.
Work PrismBackend::barrier(const c10d::BarrierOptions&) {
  return launch({"barrier", OpType::BARRIER, {op(PRISM_BARRIER, PRISM_BFLOAT16, 0)}, {}, {}});
}

void PrismBackend::monitoredBarrier(const c10d::BarrierOptions& opts, bool) {
  barrier(opts)->wait(::kNoTimeout);
}

}  // namespace prism::torch_shim
