// Kernel times from a profiled step (kineto/kernel_calibration.h): the
// fixture gpu_step.json (tests/data/kineto/make_gpu_step.py: a real torch
// 2.11 step's host ops with the kernels CUDA would launch under them) gives
// exactly the rows worked out by hand below; small traces written here test
// the attribution rules and every rejection.
#include "kineto/kernel_calibration.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compute/kernel_db.h"
#include "kineto/kineto.h"
#include "kineto/trace_events.h"
#include "kineto_test_util.h"
#include "util/file.h"

namespace prism {
namespace {

using kineto_test::fixture;
using kineto_test::Json;
using kineto_test::TraceJson;
using ::testing::HasSubstr;

KernelCalibrationOptions dated(std::string gpu = "") {
  KernelCalibrationOptions o;
  o.gpu = std::move(gpu);
  o.date = "2026-11-27";
  return o;
}

Result<KernelCalibration> calibrate_text(const std::string& text,
                                         const KernelCalibrationOptions& o = dated()) {
  return calibrate_kernels({{"dir/t.json", text}}, o);
}

std::string error_of(const Result<KernelCalibration>& r) {
  return r.is_ok() ? "(no error)" : r.status().message();
}

// The fixture, op by op (make_gpu_step.py prints them); each op's kernels
// take 10% longer in step 1 than in step 0, so a signature of one op per
// step has the mean of the two as its median:
//   qkv aten::linear [32,64]x[128,64]^T: mm 12 / 13.2 us        -> 12.600
//   proj aten::linear (bias, addmm) [32,64]x[64,64]^T: 20 / 22, and its
//     dgrad mm [32,64]x[64,64] 12 / 13.2: the same signature, 4 ops:
//     12, 13.2, 20, 22                                           -> 16.600
//   aten::bmm forward and its two backward bmm: 30 / 33           -> 31.500
//   attention forward (aten::scaled_dot_product_attention, causal GQA):
//     50 / 55                                                    -> 52.500
//   attention backward (the flash backward's three kernels, 5+100+7):
//     112 / 123.2                                                -> 117.600
//   fp8 aten::_scaled_mm [32,64]x[64,48]: 8 / 8.8                 -> 8.400
//   aten::layer_norm of [2,16,64] bf16 (2048 elements): 2.5 / 2.75, as
//     the builder's norm_fwd of 2 x 2 B x 2048                    -> 2.625
//   its backward (two kernels, 3 + 1.5): 4.5 / 4.95, norm_bwd of
//     4 x 2 B x 2048                                             -> 4.725
// GELU, copies, fills and adds are not mapped; the NCCL kernel is left out.
constexpr std::string_view kExpectedCsv =
    "gpu,signature,us,source,count\n"
    "H100-SXM5-80GB,attn_bwd bf16 b=2 hq=4 hkv=2 sq=16 skv=16 d=16 causal,117.600,kineto "
    "gpu_step.json 2026-11-27,2\n"
    "H100-SXM5-80GB,attn_fwd bf16 b=2 hq=4 hkv=2 sq=16 skv=16 d=16 causal,52.500,kineto "
    "gpu_step.json 2026-11-27,2\n"
    "H100-SXM5-80GB,gemm bf16 m=128 n=64 k=32,12.600,kineto gpu_step.json 2026-11-27,2\n"
    "H100-SXM5-80GB,gemm bf16 m=16 n=32 k=32 batch=4,31.500,kineto gpu_step.json 2026-11-27,2\n"
    "H100-SXM5-80GB,gemm bf16 m=32 n=128 k=64,12.600,kineto gpu_step.json 2026-11-27,2\n"
    "H100-SXM5-80GB,gemm bf16 m=32 n=16 k=32 batch=4,31.500,kineto gpu_step.json 2026-11-27,2\n"
    "H100-SXM5-80GB,gemm bf16 m=32 n=32 k=16 batch=4,31.500,kineto gpu_step.json 2026-11-27,2\n"
    "H100-SXM5-80GB,gemm bf16 m=32 n=64 k=128,12.600,kineto gpu_step.json 2026-11-27,2\n"
    "H100-SXM5-80GB,gemm bf16 m=32 n=64 k=64,16.600,kineto gpu_step.json 2026-11-27,4\n"
    "H100-SXM5-80GB,gemm bf16 m=64 n=64 k=32,12.600,kineto gpu_step.json 2026-11-27,2\n"
    "H100-SXM5-80GB,gemm fp8 m=32 n=48 k=64,8.400,kineto gpu_step.json 2026-11-27,2\n"
    "H100-SXM5-80GB,mem norm_bwd bytes=16384,4.725,kineto gpu_step.json 2026-11-27,2\n"
    "H100-SXM5-80GB,mem norm_fwd bytes=8192,2.625,kineto gpu_step.json 2026-11-27,2\n";

TEST(KernelCalibrationTest, ATorchStepGivesTheExpectedRows) {
  Result<KernelCalibration> r = calibrate_kernels_from_files({fixture("gpu_step.json")}, dated());
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  const KernelCalibration& c = r.value();
  EXPECT_EQ(kernel_db_csv(c), kExpectedCsv);
  EXPECT_EQ(c.gpu, "H100-SXM5-80GB");
  EXPECT_EQ(c.gpu_origin, "the trace's device 'NVIDIA H100 80GB HBM3'");
  EXPECT_EQ(c.traces, 1);
  EXPECT_EQ(c.ops_matched, 28);
  EXPECT_EQ(c.activities_matched, 34);  // the flash backward launches 3, the norm's 2
  EXPECT_EQ(c.device_activities, 56);
  EXPECT_EQ(c.nccl_kernels, 1);
  ASSERT_EQ(c.unmapped.size(), 5u);
  const UnmappedOps& gelu =
      c.unmapped.at("aten::gelu: no GEMM, attention, norm or softmax op around its kernels");
  EXPECT_EQ(gelu.ops, 2);
  EXPECT_EQ(gelu.device_ns, 3000 + 3300);
  int ops = 0;
  for (const auto& [why, u] : c.unmapped) ops += u.ops;
  EXPECT_EQ(ops, 22);
  EXPECT_EQ(
      c.matched_ns +
          [&] {
            std::int64_t ns = 0;
            for (const auto& [why, u] : c.unmapped) ns += u.device_ns;
            return ns;
          }(),
      c.device_ns);

  // The database reads it, and its times are what the kernels look up.
  Result<KernelDb> db = KernelDb::parse(kernel_db_csv(c), "insitu.csv", "H100-SXM5-80GB");
  ASSERT_TRUE(db.is_ok()) << db.status().message();
  EXPECT_EQ(db.value().size(), 13u);
  EXPECT_EQ(db.value().find_us("gemm fp8 m=32 n=48 k=64"), 8.4);
  EXPECT_EQ(db.value().find_us("gemm bf16 m=32 n=64 k=64"), 16.6);
}

TEST(KernelCalibrationTest, TwoTracesPoolTheirOpsAndNameBothInTheSource) {
  Result<std::string> text = read_file(fixture("gpu_step.json"));
  ASSERT_TRUE(text.is_ok());
  Result<KernelCalibration> r =
      calibrate_kernels({{"a/one.json", text.value()}, {"b/two,x.json", text.value()}}, dated());
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r.value().traces, 2);
  EXPECT_EQ(r.value().source, "kineto one.json+two_x.json 2026-11-27");
  EXPECT_EQ(r.value().kernels.front().count, 4);  // attn_bwd: 2 per trace
  EXPECT_EQ(r.value().kernels.front().median_ns, 117600);
}

// A trace parsed once gives the same calibration, and the same program,
// as the text each parses itself.
TEST(KernelCalibrationTest, AParsedTraceGivesWhatItsTextGives) {
  Result<std::string> text = read_file(fixture("gpu_step.json"));
  ASSERT_TRUE(text.is_ok());
  Result<kineto::ParsedTrace> parsed = kineto::parse_trace(text.value(), "dir/gpu_step.json");
  ASSERT_TRUE(parsed.is_ok()) << parsed.status().message();
  Result<KernelCalibration> r = calibrate_parsed_kernels({&parsed.value()}, dated());
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(kernel_db_csv(r.value()), kExpectedCsv);
  EXPECT_EQ(error_of(calibrate_parsed_kernels({}, dated())), "no trace given");
  // A rank's program from another trace (this one's NCCL kernel has no
  // collective metadata).
  Result<std::string> rank0 = read_file(fixture("gpu_rank0.json"));
  ASSERT_TRUE(rank0.is_ok());
  Result<kineto::ParsedTrace> parsed0 = kineto::parse_trace(rank0.value(), "gpu_rank0.json");
  ASSERT_TRUE(parsed0.is_ok()) << parsed0.status().message();
  Result<KinetoTrace> from_parsed = kineto_trace_of(parsed0.value());
  Result<KinetoTrace> from_text = parse_kineto_trace(rank0.value(), "gpu_rank0.json");
  ASSERT_TRUE(from_parsed.is_ok()) << from_parsed.status().message();
  ASSERT_TRUE(from_text.is_ok()) << from_text.status().message();
  EXPECT_EQ(from_parsed.value().program.role.ops.size(), from_text.value().program.role.ops.size());
  EXPECT_EQ(from_parsed.value().summary.compute_ops, from_text.value().summary.compute_ops);
  EXPECT_EQ(from_parsed.value().summary.collectives, from_text.value().summary.collectives);
  EXPECT_GT(from_parsed.value().summary.collectives, 0);
  // The same error, too.
  EXPECT_EQ(kineto_trace_of(parsed.value()).status().message(),
            parse_kineto_trace(text.value(), "dir/gpu_step.json").status().message());
}

// One aten::mm with `dims` ([[m,k],[k,n]]) launching one kernel of `us`.
TraceJson one_gemm(double us, Json kernel_args = {{"External id", 7}}) {
  TraceJson t;
  t.doc["deviceProperties"] = Json::array(
      {{{"id", 0}, {"name", "NVIDIA H100 80GB HBM3"}, {"totalGlobalMem", 85029158912}}});
  t.add("cpu_op", "aten::mm", 10, 20,
        {{"External id", 7},
         {"Input Dims", {{64, 32}, {32, 16}}},
         {"Input type", {"c10::BFloat16", "c10::BFloat16"}},
         {"Concrete Inputs", {"", ""}}});
  t.add("cuda_runtime", "cudaLaunchKernel", 12, 2,
        {{"External id", 7}, {"cbid", 211}, {"correlation", 55}});
  kernel_args["correlation"] = 55;
  t.kernel("sm90_gemm", 40, us, 7, kernel_args);
  return t;
}

TEST(KernelCalibrationTest, AKernelWithoutExternalIdIsTiedThroughItsLaunch) {
  Result<KernelCalibration> r = calibrate_text(one_gemm(9.5, Json::object()).text());
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(kernel_db_csv(r.value()),
            "gpu,signature,us,source,count\n"
            "H100-SXM5-80GB,gemm bf16 m=64 n=16 k=32,9.500,kineto t.json 2026-11-27,1\n");
}

// C += A B into an fp32 main_grad (addmm_) is the accumulating GEMM (acc=fp32),
// as the builder's weight gradients; with beta = 0 (C not read) and with a
// bias row it is the plain GEMM; a softmax is the builder's softmax_fwd.
TEST(KernelCalibrationTest, AccumulatingGemmsAndSoftmaxMap) {
  TraceJson t = one_gemm(5);
  t.add("cpu_op", "aten::addmm_", 100, 5,
        {{"External id", 8},
         {"Input Dims", {{64, 16}, {64, 32}, {32, 16}, Json::array(), Json::array()}},
         {"Input type", {"float", "c10::BFloat16", "c10::BFloat16", "Scalar", "Scalar"}},
         {"Concrete Inputs", {"", "", "", "1", "1"}}});
  t.kernel("sm90_gemm_accumulate", 200, 7, 7, {{"External id", 8}});
  // addmm.dtype (out_dtype before beta) into bf16, batched: acc=bf16.
  t.add("cpu_op", "aten::baddbmm", 500, 5,
        {{"External id", 10},
         {"Input Dims",
          {{2, 64, 16}, {2, 64, 32}, {2, 32, 16}, Json::array(), Json::array(), Json::array()}},
         {"Input type",
          {"c10::BFloat16", "c10::BFloat16", "c10::BFloat16", "Scalar", "Scalar", "Scalar"}},
         {"Concrete Inputs", {"", "", "", "15", "1", "1"}}});
  t.kernel("sm90_gemm_baddbmm", 600, 3, 7, {{"External id", 10}});
  // beta = 0: C is not read.
  t.add("cpu_op", "aten::addmm", 700, 5,
        {{"External id", 11},
         {"Input Dims", {{64, 16}, {64, 32}, {32, 16}, Json::array(), Json::array()}},
         {"Input type", {"float", "c10::BFloat16", "c10::BFloat16", "Scalar", "Scalar"}},
         {"Concrete Inputs", {"", "", "", "0", "1"}}});
  t.kernel("sm90_gemm_beta0", 800, 9, 7, {{"External id", 11}});
  t.add("cpu_op", "aten::_softmax", 300, 5,
        {{"External id", 9},
         {"Input Dims", {{2, 4, 16, 16}, Json::array(), Json::array()}},
         {"Input type", {"c10::BFloat16", "Scalar", "Scalar"}},
         {"Concrete Inputs", {"", "-1", "False"}}});
  t.kernel("softmax_warp_forward", 400, 2, 7, {{"External id", 9}});
  Result<KernelCalibration> r = calibrate_text(t.text());
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(kernel_db_csv(r.value()),
            "gpu,signature,us,source,count\n"
            "H100-SXM5-80GB,gemm bf16 m=64 n=16 k=32,7.000,kineto t.json 2026-11-27,2\n"
            "H100-SXM5-80GB,gemm bf16 m=64 n=16 k=32 acc=fp32,7.000,kineto t.json 2026-11-27,1\n"
            "H100-SXM5-80GB,gemm bf16 m=64 n=16 k=32 batch=2 acc=bf16,3.000,kineto t.json "
            "2026-11-27,1\n"
            "H100-SXM5-80GB,mem softmax_fwd bytes=8192,2.000,kineto t.json 2026-11-27,1\n");
}

TEST(KernelCalibrationTest, OpsThatAreNoSignatureSayWhy) {
  TraceJson t = one_gemm(5);
  // A causal attention with fewer queries than keys, one with a mask, a
  // matrix-vector matmul: counted, not written.
  const Json q = {1, 8, 128, 64}, k = {1, 8, 256, 64};
  int id = 100;
  for (const auto& [name, dims, concrete] :
       {std::tuple{"aten::scaled_dot_product_attention", Json{q, k, k, Json::array(), {}, {}},
                   Json{"", "", "", "", "0.", "True", "", "False"}},
        std::tuple{"aten::scaled_dot_product_attention", Json{q, q, q, {1, 1, 128, 128}, {}, {}},
                   Json{"", "", "", "", "0.", "False", "", "False"}},
        std::tuple{"aten::matmul", Json{{4, 8}, {8}}, Json{"", ""}}}) {
    ++id;
    t.add("cpu_op", name, 100.0 + id, 5,
          {{"External id", id},
           {"Input Dims", dims},
           {"Input type", Json::array({"c10::BFloat16", "c10::BFloat16", "c10::BFloat16"})},
           {"Concrete Inputs", concrete}});
    t.kernel("k", 200.0 + id, 1, 7, {{"External id", id}});
  }
  Result<KernelCalibration> r = calibrate_text(t.text());
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  const auto& u = r.value().unmapped;
  EXPECT_EQ(u.size(), 3u);
  EXPECT_TRUE(
      u.contains("aten::scaled_dot_product_attention: causal with sq != skv (torch aligns the mask "
                 "top-left, a signature's causal is bottom-right)"));
  EXPECT_TRUE(u.contains("aten::scaled_dot_product_attention: an explicit attention mask"));
  EXPECT_TRUE(u.contains("aten::matmul: a matrix-vector product"));
  EXPECT_EQ(r.value().kernels.size(), 1u);
}

TEST(KernelCalibrationTest, TheGpuComesFromTheTraceOrFromTheOption) {
  TraceJson t = one_gemm(5);
  t.doc.erase("deviceProperties");
  EXPECT_EQ(error_of(calibrate_text(t.text())),
            "dir/t.json: no deviceProperties for the kernels' device: name the GPU with --gpu");
  Result<KernelCalibration> r = calibrate_text(t.text(), dated("H200-SXM-141GB"));
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r.value().gpu, "H200-SXM-141GB");
  EXPECT_EQ(r.value().gpu_origin, "--gpu (the trace has no deviceProperties)");

  t.doc["deviceProperties"] = Json::array({{{"id", 0}, {"name", "NVIDIA H100 PCIe"}}});
  EXPECT_EQ(error_of(calibrate_text(t.text())),
            "dir/t.json: device 'NVIDIA H100 PCIe' has no GPU preset: name the database GPU "
            "with --gpu");
  EXPECT_TRUE(calibrate_text(t.text(), dated("H100-SXM5-80GB")).is_ok());

  EXPECT_EQ(error_of(calibrate_text(one_gemm(5).text(), dated("H200-SXM-141GB"))),
            "dir/t.json: the trace ran on 'NVIDIA H100 80GB HBM3' (H100-SXM5-80GB), not --gpu "
            "H200-SXM-141GB");
  EXPECT_THAT(error_of(calibrate_text(one_gemm(5).text(), dated("H100"))),
              HasSubstr("H100-SXM5-80GB"));  // the presets are named
}

TEST(KernelCalibrationTest, NotAKinetoTraceIsRefused) {
  EXPECT_EQ(error_of(calibrate_text(R"({"nodes": []})")),
            "dir/t.json: no \"traceEvents\" (not a PyTorch profiler trace)");
}

TEST(KernelCalibrationTest, ATraceWithoutGpuKernelsIsRefused) {
  Result<KernelCalibration> r =
      calibrate_kernels_from_files({fixture("cpu113_rank0.json")}, dated());
  EXPECT_THAT(error_of(r), HasSubstr("cpu113_rank0.json: no GPU kernels (other than NCCL's): "
                                     "profile the step on the GPU with "
                                     "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]"));
}

TEST(KernelCalibrationTest, ATraceWithoutShapesIsRefused) {
  TraceJson t = one_gemm(5);
  t.events()[0]["args"].erase("Input Dims");
  EXPECT_EQ(error_of(calibrate_text(t.text())),
            "dir/t.json: no input shapes recorded: profile with torch.profiler.profile(..., "
            "record_shapes=True)");
  t = one_gemm(5);
  t.doc["record_shapes"] = 0;  // torch writes the flag beside deviceProperties
  EXPECT_THAT(error_of(calibrate_text(t.text())), HasSubstr("record_shapes=True"));
}

TEST(KernelCalibrationTest, ATraceWithoutHostOpsIsRefused) {
  TraceJson t = one_gemm(5);
  t.events().erase(t.events().begin());
  EXPECT_EQ(error_of(calibrate_text(t.text())),
            "dir/t.json: no host operators, so no kernel can be tied to an op: profile with "
            "ProfilerActivity.CPU too");
}

TEST(KernelCalibrationTest, ATraceWithNothingMappedIsRefused) {
  TraceJson t = one_gemm(5);
  t.events()[0]["name"] = "aten::add";
  EXPECT_EQ(error_of(calibrate_text(t.text())),
            "dir/t.json: no kernel ran under an op with a signature (GEMMs, attention, norms, "
            "softmax; docs/kineto.md): nothing to write");
}

TEST(KernelCalibrationTest, TracesOfTwoGpusAndBadDatesAreRefused) {
  TraceJson other = one_gemm(5);
  other.doc["deviceProperties"][0]["name"] = "NVIDIA H200";
  EXPECT_EQ(error_of(calibrate_kernels({{"a.json", one_gemm(5).text()}, {"b.json", other.text()}},
                                       dated())),
            "b.json: ran on 'NVIDIA H200', but a.json on 'NVIDIA H100 80GB HBM3'; one calibration "
            "is for one GPU");
  KernelCalibrationOptions o = dated();
  o.date = "27.11.2026";
  EXPECT_EQ(error_of(calibrate_text(one_gemm(5).text(), o)), "date '27.11.2026' is not YYYY-MM-DD");
}

}  // namespace
}  // namespace prism
