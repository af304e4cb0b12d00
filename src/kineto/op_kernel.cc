#include "kineto/op_kernel.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "util/vocab.h"

namespace prism::kineto {
namespace {

using Dims = std::vector<std::int64_t>;

// Sizes past this are not a real tensor's; their product would overflow.
constexpr std::int64_t kMaxDim = std::int64_t{1} << 31;
constexpr std::int64_t kMaxElements = std::int64_t{1} << 50;

// The recorded inputs of an op, by position.
struct Inputs {
  std::vector<std::optional<Dims>> dims;  // a tensor's sizes; [] a scalar or None; unset: a list
  std::vector<std::string> types;         // "c10::BFloat16", "float", "Scalar", ""
  std::vector<std::string> concrete;      // scalar values as text ("True", "0."), else ""

  const std::optional<Dims>* dim(std::size_t i) const {
    return i < dims.size() ? &dims[i] : nullptr;
  }
  std::string_view type(std::size_t i) const {
    return i < types.size() ? std::string_view(types[i]) : std::string_view();
  }
};

Inputs read_inputs(const TraceEvent& op) {
  Inputs in;
  if (const Json* dims = find_arg(op.args, "Input Dims"); dims != nullptr && dims->is_array()) {
    for (const Json& d : *dims) {
      std::optional<Dims> sizes = Dims{};
      if (!d.is_array()) {
        sizes.reset();
      } else {
        for (const Json& v : d) {
          const std::optional<std::int64_t> n = v.is_number() ? arg_int(&v) : std::nullopt;
          if (!n) {
            sizes.reset();
            break;
          }
          sizes->push_back(*n);
        }
      }
      in.dims.push_back(std::move(sizes));
    }
  }
  for (const auto& [key, out] :
       {std::pair{"Input type", &in.types}, std::pair{"Concrete Inputs", &in.concrete}}) {
    const Json* list = find_arg(op.args, key);
    if (list == nullptr || !list->is_array()) continue;
    for (const Json& v : *list) out->push_back(v.is_string() ? v.get<std::string>() : "");
  }
  return in;
}

std::optional<DType> dtype_of(std::string_view t) {
  if (t == "c10::BFloat16") return DType::kBFloat16;
  if (t == "c10::Half") return DType::kFloat16;
  if (t == "float") return DType::kFloat32;
  if (t == "c10::Float8_e4m3fn" || t == "c10::Float8_e4m3fnuz") return DType::kFloat8E4M3;
  if (t == "c10::Float8_e5m2" || t == "c10::Float8_e5m2fnuz") return DType::kFloat8E5M2;
  return std::nullopt;
}

OpKernel no(std::string why) {
  return OpKernel{std::nullopt, std::move(why)};
}

// The input at `i` as a tensor of `rank` (0: any rank >= 1), sizes in range.
std::optional<Dims> tensor(const Inputs& in, std::size_t i, std::size_t rank, std::string* why) {
  const std::optional<Dims>* d = in.dim(i);
  if (d == nullptr || !*d || (*d)->empty()) {
    *why = fmt::format("input {} has no recorded shape", i);
    return std::nullopt;
  }
  const Dims& dims = **d;
  if (rank != 0 && dims.size() != rank) {
    *why =
        fmt::format("input {} is {}-d [{}], not {}-d", i, dims.size(), fmt::join(dims, ", "), rank);
    return std::nullopt;
  }
  std::int64_t elements = 1;
  for (std::int64_t v : dims) {
    if (v < 0 || v > kMaxDim || (v > 0 && elements > kMaxElements / v)) {
      *why = fmt::format("input {} has sizes out of range [{}]", i, fmt::join(dims, ", "));
      return std::nullopt;
    }
    elements *= v;
  }
  return dims;
}

// The type of a GEMM from its two matrices' types: equal, or both FP8.
std::optional<DType> gemm_type(const Inputs& in, std::size_t a, std::size_t b, std::string* why) {
  const std::optional<DType> ta = dtype_of(in.type(a)), tb = dtype_of(in.type(b));
  if (!ta || !tb) {
    *why = fmt::format("input type '{}' x '{}' is not bf16, fp16, fp32 or fp8", in.type(a),
                       in.type(b));
    return std::nullopt;
  }
  if (*ta != *tb && !(is_fp8(*ta) && is_fp8(*tb))) {
    *why = fmt::format("mixed input types '{}' x '{}'", in.type(a), in.type(b));
    return std::nullopt;
  }
  return ta;
}

std::int64_t product(const Dims& d, std::size_t begin, std::size_t end) {
  std::int64_t p = 1;
  for (std::size_t i = begin; i < end; ++i) p *= d[i];
  return p;
}

// C = A B for A [.., m, k] at input `a` and B at `b` as the op names them:
// rank_a / rank_b 0 for "any" (matmul), 2 for a matrix, 3 for a batch.
OpKernel gemm_inputs(const Inputs& in, std::size_t a, std::size_t b, std::size_t rank_a,
                     std::size_t rank_b, bool b_transposed = false) {
  std::string why;
  const std::optional<Dims> da = tensor(in, a, rank_a, &why);
  if (!da) return no(why);
  const std::optional<Dims> db = tensor(in, b, rank_b, &why);
  if (!db) return no(why);
  const std::optional<DType> dt = gemm_type(in, a, b, &why);
  if (!dt) return no(why);
  const Dims& A = *da;
  const Dims& B = *db;
  if (A.size() < 2 || B.size() < 2) return no("a matrix-vector product");
  // B as [.., k, n]; linear's weight is [n, k].
  const std::int64_t bk = b_transposed ? B.back() : B[B.size() - 2];
  const std::int64_t n = b_transposed ? B[B.size() - 2] : B.back();
  const std::int64_t k = A.back();
  if (bk != k) {
    return no(fmt::format("shapes [{}] and [{}] do not multiply", fmt::join(A, ", "),
                          fmt::join(B, ", ")));
  }
  if (B.size() == 2) return {gemm(product(A, 0, A.size() - 1), n, k, *dt), {}};
  if (A.size() != B.size() || !std::equal(A.begin(), A.end() - 2, B.begin())) {
    return no(fmt::format("broadcast batch dimensions [{}] x [{}]", fmt::join(A, ", "),
                          fmt::join(B, ", ")));
  }
  const std::int64_t batch = product(A, 0, A.size() - 2);
  return {gemm(A[A.size() - 2], n, k, *dt, batch), {}};
}

// Where an attention op keeps what we read (its schema in torch 2.11).
struct AttentionOp {
  std::string_view name;
  bool backward;
  std::size_t q, k;
  int mask;  // attn_mask / attn_bias, -1: none
  std::size_t causal;
  bool bshd;  // [b, s, h, d] (the flash kernels' own layout), else [b, h, s, d]
};

constexpr std::array<AttentionOp, 11> kAttentionOps{{
    {"aten::scaled_dot_product_attention", false, 0, 1, 3, 5, false},
    {"aten::_scaled_dot_product_flash_attention", false, 0, 1, -1, 4, false},
    {"aten::_scaled_dot_product_cudnn_attention", false, 0, 1, 3, 6, false},
    {"aten::_scaled_dot_product_efficient_attention", false, 0, 1, 3, 6, false},
    {"aten::_flash_attention_forward", false, 0, 1, -1, 8, true},
    {"aten::_scaled_dot_product_flash_attention_for_cpu", false, 0, 1, 5, 4, false},
    {"aten::_scaled_dot_product_flash_attention_backward", true, 1, 2, -1, 11, false},
    {"aten::_scaled_dot_product_cudnn_attention_backward", true, 1, 2, 8, 14, false},
    {"aten::_scaled_dot_product_efficient_attention_backward", true, 1, 2, 4, 11, false},
    {"aten::_flash_attention_backward", true, 1, 2, -1, 11, true},
    {"aten::_scaled_dot_product_flash_attention_for_cpu_backward", true, 1, 2, 8, 7, false},
}};

constexpr std::array<std::string_view, 9> kGemmOps{
    "aten::mm",       "aten::addmm",  "aten::addmm_", "aten::bmm",        "aten::baddbmm",
    "aten::baddbmm_", "aten::matmul", "aten::linear", "aten::_scaled_mm",
};

// Memory-bound ops the builder emits under a name of its own, with its
// traffic convention: `passes` times the input's bytes (a norm reads x and
// writes y: 2; its backward reads x and dy, writes dx, and more: 4; the
// softmax backward reads y and dy, writes dx: 3).
struct MemoryOp {
  std::string_view name;
  std::string_view kernel;  // the builder's name (workload/megatron_layers.cc)
  std::size_t input;
  int passes;
};

constexpr std::array<MemoryOp, 9> kMemoryOps{{
    {"aten::layer_norm", "norm_fwd", 0, 2},
    {"aten::native_layer_norm", "norm_fwd", 0, 2},
    {"aten::rms_norm", "norm_fwd", 0, 2},
    {"aten::_fused_rms_norm", "norm_fwd", 0, 2},
    {"aten::native_layer_norm_backward", "norm_bwd", 1, 4},
    {"aten::_fused_rms_norm_backward", "norm_bwd", 1, 4},
    {"aten::softmax", "softmax_fwd", 0, 2},
    {"aten::_softmax", "softmax_fwd", 0, 2},
    {"aten::_softmax_backward_data", "softmax_bwd", 0, 3},
}};

const MemoryOp* memory_op(std::string_view name) {
  for (const MemoryOp& m : kMemoryOps)
    if (m.name == name) return &m;
  return nullptr;
}

OpKernel memory_kernel(const MemoryOp& op, const Inputs& in) {
  std::string why;
  const std::optional<Dims> x = tensor(in, op.input, 0, &why);
  if (!x) return no(why);
  const std::optional<DType> dt = dtype_of(in.type(op.input));
  if (!dt || is_fp8(*dt))
    return no(fmt::format("input type '{}' is not bf16, fp16 or fp32", in.type(op.input)));
  const std::int64_t bytes = op.passes * dtype_size(*dt) * product(*x, 0, x->size());
  return {memory_bound(op.kernel, bytes), {}};
}

const AttentionOp* attention_op(std::string_view name) {
  for (const AttentionOp& a : kAttentionOps)
    if (a.name == name) return &a;
  return nullptr;
}

OpKernel attention_kernel(const AttentionOp& op, const Inputs& in) {
  std::string why;
  const std::optional<Dims> q = tensor(in, op.q, 4, &why);
  if (!q) return no("query: " + why);
  const std::optional<Dims> k = tensor(in, op.k, 4, &why);
  if (!k) return no("key: " + why);
  if (op.mask >= 0) {
    const std::optional<Dims>* m = in.dim(static_cast<std::size_t>(op.mask));
    if (m != nullptr && (!*m || !(*m)->empty())) return no("an explicit attention mask");
  }
  const std::string_view causal_text =
      op.causal < in.concrete.size() ? std::string_view(in.concrete[op.causal]) : "";
  if (causal_text != "True" && causal_text != "False")
    return no("is_causal not recorded (Concrete Inputs)");
  const bool causal = causal_text == "True";
  const std::optional<DType> dt = dtype_of(in.type(op.q));
  if (!dt) return no(fmt::format("query type '{}' is not bf16, fp16, fp32 or fp8", in.type(op.q)));
  const std::int64_t b = (*q)[0], d = (*q)[3];
  const std::int64_t hq = op.bshd ? (*q)[2] : (*q)[1], sq = op.bshd ? (*q)[1] : (*q)[2];
  const std::int64_t hkv = op.bshd ? (*k)[2] : (*k)[1], skv = op.bshd ? (*k)[1] : (*k)[2];
  if ((*k)[0] != b || (*k)[3] != d)
    return no(fmt::format("query [{}] and key [{}] differ in batch or head size",
                          fmt::join(*q, ", "), fmt::join(*k, ", ")));
  if (hkv == 0 || hq % hkv != 0)
    return no(fmt::format("{} query heads are not a multiple of {} key heads", hq, hkv));
  if (causal && sq != skv) {
    return no(
        "causal with sq != skv (torch aligns the mask top-left, a signature's causal is "
        "bottom-right)");
  }
  return {attention(op.backward, b, hq, hkv, sq, skv, d, causal, *dt), {}};
}

}  // namespace

bool is_kernel_op(std::string_view name) {
  return attention_op(name) != nullptr || memory_op(name) != nullptr ||
         std::find(kGemmOps.begin(), kGemmOps.end(), name) != kGemmOps.end();
}

bool has_input_dims(const TraceEvent& op) {
  const Json* dims = find_arg(op.args, "Input Dims");
  return dims != nullptr && dims->is_array();
}

// addmm / baddbmm (C, A, B; then beta, alpha, or out_dtype, beta, alpha in
// the .dtype overloads): a C of the product's full shape, read (beta != 0),
// is accumulated into, as a weight gradient into main_grad: `acc` C's type.
// A bias (C of one row, broadcast) leaves the plain GEMM. A 0 at position 3
// or 4 is taken as beta 0 (an out_dtype is never 0, uint8; alpha 0 would
// leave no product).
OpKernel accumulating(const Inputs& in, OpKernel k) {
  if (!k.kernel) return k;
  Kernel& g = *k.kernel;
  const std::optional<Dims>* d = in.dim(0);
  if (d == nullptr || !*d) return k;
  const Dims& c = **d;
  const Dims full = c.size() == 3 ? Dims{g.batch, g.m, g.n} : Dims{g.m, g.n};
  if (c != full) return k;
  for (std::size_t i : {3, 4}) {
    const std::string_view v = i < in.concrete.size() ? in.concrete[i] : "";
    if (v == "0" || v == "0." || v == "0.0") return k;  // C not read
  }
  const std::optional<DType> t = dtype_of(in.type(0));
  if (t && (*t == DType::kFloat32 || *t == DType::kBFloat16 || *t == DType::kFloat16)) g.acc = t;
  return k;
}

OpKernel kernel_of_op(const TraceEvent& op) {
  if (!has_input_dims(op)) return no("no input shapes recorded");
  const Inputs in = read_inputs(op);
  if (const AttentionOp* a = attention_op(op.name)) return attention_kernel(*a, in);
  if (const MemoryOp* m = memory_op(op.name)) return memory_kernel(*m, in);
  const std::string_view name = op.name;
  if (name == "aten::mm" || name == "aten::_scaled_mm") {
    OpKernel k = gemm_inputs(in, 0, 1, 2, 2);
    if (k.kernel && name == "aten::mm" && is_fp8(k.kernel->dtype)) return no("fp8 without scales");
    return k;
  }
  // C + A B (in place for addmm_, baddbmm_): accumulating() tells a C that
  // is accumulated into from a bias.
  if (name == "aten::addmm" || name == "aten::addmm_")
    return accumulating(in, gemm_inputs(in, 1, 2, 2, 2));
  if (name == "aten::bmm") return gemm_inputs(in, 0, 1, 3, 3);
  if (name == "aten::baddbmm" || name == "aten::baddbmm_")
    return accumulating(in, gemm_inputs(in, 1, 2, 3, 3));
  if (name == "aten::matmul") return gemm_inputs(in, 0, 1, 0, 0);
  if (name == "aten::linear") return gemm_inputs(in, 0, 1, 0, 2, true);
  return no("not an op with a kernel signature");
}

}  // namespace prism::kineto
