// A profiled PyTorch operator as one of our kernels (compute/kernel.h): the
// GEMM or attention that an aten op computes, read from the shapes, types and
// scalar values the profiler recorded with record_shapes=True ("Input Dims",
// "Input type", "Concrete Inputs"). Internal to src/kineto; the calibration
// from a trace (kernel_calibration.h) is its user.
//
// Mapped ops and the kernel they give (docs/kineto.md, "Kernel times from a
// trace"):
//   aten::mm, aten::addmm(_), aten::matmul, aten::linear  gemm m n k
//   aten::bmm, aten::baddbmm(_), batched aten::matmul     gemm ... batch=N
//   aten::_scaled_mm                                      gemm fp8 ...
//   aten::scaled_dot_product_attention and the flash, cuDNN and efficient
//   kernels it dispatches to (forward and backward)       attn_fwd / attn_bwd
//   aten::layer_norm, rms_norm (and their native/fused kernels), their
//   backward; aten::softmax and its backward              mem norm_fwd/norm_bwd/
//                                                          softmax_fwd/softmax_bwd
//                                                          bytes=N as the builder
//                                                          counts them
// An op of that list whose recorded inputs do not form such a kernel (a
// vector product, a mask, mixed types, no shapes) gives the reason instead.
// addmm(_)/baddbmm(_) whose C has the product's full shape and beta != 0
// (C += A B: a weight gradient accumulated into main_grad without Megatron's
// fused kernel, or torch.addmm(C, A, B, out_dtype=float32, out=C)) give
// `acc=` C's type, as the builder's weight-gradient GEMMs; a bias (one row)
// gives the plain GEMM.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "compute/kernel.h"
#include "kineto/trace_events.h"

namespace prism::kineto {

// Whether `name` is an op of the list above.
bool is_kernel_op(std::string_view name);

struct OpKernel {
  std::optional<Kernel> kernel;
  std::string why_not;  // when there is no kernel: what is missing or unsupported
};

// The kernel of a host op whose name is_kernel_op().
OpKernel kernel_of_op(const TraceEvent& op);

// Whether the op recorded its inputs' shapes (record_shapes=True).
bool has_input_dims(const TraceEvent& op);

}  // namespace prism::kineto
