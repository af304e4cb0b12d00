// What a torch tensor is in PrismLLM's terms (element type, bytes), and what
// a collective does to this rank's data when its peers are virtual.
//
// Virtual ranks hold no data, so the backend assumes the job is symmetric:
// every peer holds what this rank holds. A SUM over n ranks is then n times
// this rank's tensor, an all_gather fills every slot with this rank's input,
// and data that only another rank has (a broadcast from another root, a
// receive) leaves the buffer as it was. docs/torch-backend.md has the table.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "prism/client.h"

namespace prism::torch_shim {

// The element type and total bytes of the tensors one call hands over.
struct Payload {
  prism_dtype dtype = PRISM_FLOAT32;
  std::int64_t bytes = 0;
};

// `call` names the torch call in errors. Throws c10::Error (RuntimeError in
// Python) for an empty list, for element types PrismLLM has no code for
// (int16, complex, ...), and for tensors of different types in one call:
// a PrismLLM op has one element type.
Payload payload_of(std::span<const at::Tensor> tensors, const char* call);
inline Payload payload_of(const at::Tensor& tensor, const char* call) {
  return payload_of(std::span<const at::Tensor>(&tensor, 1), call);
}

// A tensor's size in bytes.
std::int64_t bytes_of(const at::Tensor& t);

// The tensor's storage seen without autograd: the backend writes results
// the way a real backend does, into memory, without bumping version
// counters or recording an in-place op.
at::Tensor raw(const at::Tensor& t);

// The result of reducing `group_size` identical copies of t, in place: SUM
// multiplies by the group size, PRODUCT raises to its power, AVG, MIN, MAX,
// BAND and BOR leave it, BXOR leaves it for an odd count and zeroes it for an
// even one, PREMUL_SUM multiplies by factor × group size.
void reduce_identical(const at::Tensor& t, const c10d::ReduceOp& op, int group_size);

// Checks, at the call, that `op` is one reduce_identical knows.
void check_reduce_op(const c10d::ReduceOp& op, const char* call);

// Zeros into each tensor as a backend that carries data writes them (no
// autograd, no version bump): a receive whose sender's data is not known.
void fill_zeros(const std::vector<at::Tensor>& tensors);

// Every slot gets a copy of `input` (all_gather of identical inputs).
void fill_slots(const std::vector<at::Tensor>& slots, const at::Tensor& input);

// all_to_all_single: input chunk j goes to output chunk j (rows along dim
// 0, split as given; empty splits: equal chunks). Where the two chunks
// differ in size, the common part is copied.
void copy_chunks(const at::Tensor& output, const at::Tensor& input,
                 const std::vector<std::int64_t>& output_splits,
                 const std::vector<std::int64_t>& input_splits, int group_size);

}  // namespace prism::torch_shim
