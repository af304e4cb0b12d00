#include "shim/torch/op_mapping.h"

#include <algorithm>
#include <string>

#include <c10/util/Exception.h>
#include <torch/version.h>

namespace prism::torch_shim {

namespace {

// PrismLLM's element types (docs/graph-format.md). Bool goes as uint8, as
// ProcessGroupNCCL sends it.
bool dtype_of(at::ScalarType t, prism_dtype* out) {
  switch (t) {
    case at::ScalarType::Float:
      *out = PRISM_FLOAT32;
      return true;
    case at::ScalarType::Half:
      *out = PRISM_FLOAT16;
      return true;
    case at::ScalarType::BFloat16:
      *out = PRISM_BFLOAT16;
      return true;
    case at::ScalarType::Double:
      *out = PRISM_FLOAT64;
      return true;
    case at::ScalarType::Char:
      *out = PRISM_INT8;
      return true;
    case at::ScalarType::Byte:
    case at::ScalarType::Bool:
      *out = PRISM_UINT8;
      return true;
    case at::ScalarType::Int:
      *out = PRISM_INT32;
      return true;
    case at::ScalarType::Long:
      *out = PRISM_INT64;
      return true;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
    case at::ScalarType::Float8_e4m3fn:
      *out = PRISM_FLOAT8_E4M3;
      return true;
    case at::ScalarType::Float8_e5m2:
      *out = PRISM_FLOAT8_E5M2;
      return true;
#endif
    default:
      return false;
  }
}

}  // namespace

std::int64_t bytes_of(const at::Tensor& t) {
  return static_cast<std::int64_t>(t.numel()) * static_cast<std::int64_t>(t.element_size());
}

Payload payload_of(std::span<const at::Tensor> tensors, const char* call) {
  TORCH_CHECK(!tensors.empty(), "prism: ", call, ": no tensors");
  Payload p;
  const at::ScalarType first = tensors.front().scalar_type();
  for (const at::Tensor& t : tensors) {
    p.bytes += bytes_of(t);
    TORCH_CHECK(t.scalar_type() == first, "prism: ", call, ": tensors of element types ", first,
                " and ", t.scalar_type(), " in one call; a PrismLLM op has one element type");
  }
  TORCH_CHECK(dtype_of(first, &p.dtype), "prism: ", call, ": element type ", first,
              " has no PrismLLM code (float32, float16, bfloat16, float64, int8, uint8, bool, "
              "int32, int64 do)");
  return p;
}

at::Tensor raw(const at::Tensor& t) {
  return t.variable_data();
}

void check_reduce_op(const c10d::ReduceOp& op, const char* call) {
  switch (static_cast<c10d::ReduceOp::RedOpType>(op)) {
    case c10d::ReduceOp::SUM:
    case c10d::ReduceOp::AVG:
    case c10d::ReduceOp::PRODUCT:
    case c10d::ReduceOp::MIN:
    case c10d::ReduceOp::MAX:
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
    case c10d::ReduceOp::BXOR:
      return;
    case c10d::ReduceOp::PREMUL_SUM:
      TORCH_CHECK(dynamic_cast<const c10d::NCCLPreMulSumSupplement*>(op.supplement_.get()),
                  "prism: ", call, ": PREMUL_SUM without its factor");
      return;
    default:
      TORCH_CHECK(false, "prism: ", call, ": reduce op ", static_cast<int>(op.op_),
                  " is not supported");
  }
}

void reduce_identical(const at::Tensor& t, const c10d::ReduceOp& op, int group_size) {
  const at::NoGradGuard no_grad;
  at::Tensor x = raw(t);
  const bool boolean = x.scalar_type() == at::ScalarType::Bool;
  switch (static_cast<c10d::ReduceOp::RedOpType>(op)) {
    case c10d::ReduceOp::SUM:
      if (!boolean) x.mul_(group_size);
      return;
    case c10d::ReduceOp::PRODUCT:
      if (!boolean) x.pow_(group_size);
      return;
    case c10d::ReduceOp::BXOR:
      if (group_size % 2 == 0) x.zero_();
      return;
    case c10d::ReduceOp::PREMUL_SUM: {
      const auto* s = dynamic_cast<const c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
#if TORCH_VERSION_MAJOR >= 2  // one factor tensor (1.13: a vector of them)
      const at::Tensor* factor =
          s != nullptr && s->tensor_factor.defined() ? &s->tensor_factor : nullptr;
#else
      const at::Tensor* factor =
          s != nullptr && !s->tensor_factors.empty() ? &s->tensor_factors.front() : nullptr;
#endif
      if (factor != nullptr) {
        x.mul_(factor->to(x.device()) * group_size);
      } else if (s != nullptr) {
        x.mul_(s->double_factor * group_size);
      }
      return;
    }
    default:  // AVG, MIN, MAX, BAND, BOR of identical tensors: the tensor
      return;
  }
}

void fill_zeros(const std::vector<at::Tensor>& tensors) {
  const at::NoGradGuard no_grad;
  for (const at::Tensor& t : tensors) raw(t).zero_();
}

void fill_slots(const std::vector<at::Tensor>& slots, const at::Tensor& input) {
  const at::NoGradGuard no_grad;
  const at::Tensor in = raw(input);
  for (const at::Tensor& s : slots) {
    if (!s.is_same(input)) raw(s).copy_(in.reshape(s.sizes()));
  }
}

void copy_chunks(const at::Tensor& output, const at::Tensor& input,
                 const std::vector<std::int64_t>& output_splits,
                 const std::vector<std::int64_t>& input_splits, int group_size) {
  if (output.dim() == 0 || input.dim() == 0 || output.is_same(input)) return;
  const at::NoGradGuard no_grad;
  const at::Tensor out = raw(output);
  const at::Tensor in = raw(input);
  const auto rows = [&](const std::vector<std::int64_t>& splits, const at::Tensor& t, int j) {
    return splits.empty() ? t.size(0) / group_size : splits[static_cast<std::size_t>(j)];
  };
  std::int64_t in_row = 0;
  std::int64_t out_row = 0;
  for (int j = 0; j < group_size; ++j) {
    const std::int64_t ni = rows(input_splits, in, j);
    const std::int64_t no = rows(output_splits, out, j);
    const std::int64_t n = std::min(ni, no);
    // Rows beyond the tensors' ends mean splits that disagree with the
    // shapes; torch reports those itself, so copy only what exists.
    if (n > 0 && in_row + n <= in.size(0) && out_row + n <= out.size(0) &&
        in.sizes().slice(1) == out.sizes().slice(1)) {
      out.narrow(0, out_row, n).copy_(in.narrow(0, in_row, n));
    }
    in_row += ni;
    out_row += no;
  }
}

}  // namespace prism::torch_shim
