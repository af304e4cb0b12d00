// Delayed scaling's per-chunk work beside the amax all-reduce: Transformer
// Engine's scale update over every FP8 tensor's amax history.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>

#include "workload/megatron.h"

#include "megatron_test_util.h"

namespace prism {
namespace {

using testing::build;
using testing::cluster;
using testing::kernel_uses;
using testing::parse;

const std::string kUpdate = "mem fp8_scale_update";

const std::string kJob =
    "model: {num_layers: 4, hidden_size: 1024, num_attention_heads: 8, vocab_size: 5000}\n"
    "parallelism: {tensor_model_parallel_size: 2, pipeline_model_parallel_size: 2}\n" +
    testing::cluster(8);

// 2 stages of 2 layers, 3 micro-batches per rank. After each chunk's forward
// 2 x 4 tensors per layer (input and weight of qkv, proj, fc1, fc2), after
// its backward 4 (the output gradients); each rolls its history (read and
// write, fp32) and writes its scale and inverse: 4 (2 H + 2) bytes a tensor.
TEST(MegatronFp8, ScaleUpdatesRollEachAmaxHistory) {
  const std::string batch = "training: {seq_length: 1024, global_batch_size: 6, precision: fp8";
  const BuiltJob b = build(parse(kJob + batch + ", fp8_amax_history_len: 1024}\n"));
  const std::int64_t per_tensor = 4 * (2 * 1024 + 2);
  const std::map<std::string, std::int64_t> want = {
      {"mem fp8_scale_update bytes=" + std::to_string(2 * 4 * 2 * per_tensor), 2 * 3},
      {"mem fp8_scale_update bytes=" + std::to_string(4 * 2 * per_tensor), 2 * 3},
  };
  EXPECT_EQ(kernel_uses(b, kUpdate), want);  // both roles, 3 micro-batches each
  // Megatron's default history of 1.
  const BuiltJob one = build(parse(kJob + batch + "}\n"));
  EXPECT_EQ(kernel_uses(one, kUpdate).begin()->first,
            "mem fp8_scale_update bytes=" + std::to_string(4 * 2 * 4 * (2 + 2)));
}

// Current scaling keeps no history and reduces no amax; bf16 none at all.
TEST(MegatronFp8, NoScaleUpdatesWithoutDelayedScaling) {
  const std::string batch = "training: {seq_length: 1024, global_batch_size: 6";
  EXPECT_TRUE(kernel_uses(build(parse(kJob + batch + "}\n")), kUpdate).empty());
  EXPECT_TRUE(
      kernel_uses(build(parse(kJob + batch + ", precision: fp8, fp8_recipe: tensorwise}\n")),
                  kUpdate)
          .empty());
}

}  // namespace
}  // namespace prism
