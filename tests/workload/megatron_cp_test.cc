// Context parallelism's ring attention as Transformer Engine runs it
// (AttnFuncWithCPAndKVP2P): around each step's flash-attention kernel, the
// element-wise corrections that merge the steps' partial results.
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

// 4 layers, 8 query heads of 128 in 2 groups, sequence 2048 over CP 2 (1024
// tokens per rank), 2 micro-batches per rank. Per rank and layer, with
// q = 1024 * 8 * 128 elements of Q (and of the output) and kv = 2 * 1024 *
// 2 * 128 of K and V:
// - forward, the second step's softmax statistics merge: 3 fp32 reads and
//   writes of 8 x 1024;
// - then the outputs: the first scaled (read, write), the second added
//   (read it, read and write the output), bf16: 2 * (2q + 3q);
// - backward, dQ, dK, dV copied at the first step (2 * 2 (q + kv)), added at
//   the second (2 * 3 (q + kv)).
TEST(MegatronContextParallel, RingAttentionCorrectionsAsTransformerEngineRunsThem) {
  const std::string job =
      "model: {num_layers: 4, hidden_size: 1024, num_attention_heads: 8, num_query_groups: 2,\n"
      "  vocab_size: 5000, activation: swiglu, normalization: RMSNorm}\n"
      "training: {seq_length: 2048, micro_batch_size: 1, global_batch_size: 4}\n"
      "parallelism: {context_parallel_size: 2}\n" +
      cluster(4);
  const std::int64_t q = 1024 * 8 * 128, kv = 2 * 1024 * 2 * 128;
  const std::int64_t per_rank = 4 * 2;  // layers x micro-batches
  const std::map<std::string, std::int64_t> want = {
      {"mem cp_lse_correction bytes=" + std::to_string(4 * 3 * 8 * 1024), per_rank},
      {"mem cp_out_correction bytes=" + std::to_string(2 * (2 * q + 3 * q)), per_rank},
      {"mem cp_grad_accumulate bytes=" + std::to_string(2 * 2 * (q + kv)), per_rank},
      {"mem cp_grad_accumulate bytes=" + std::to_string(2 * 3 * (q + kv)), per_rank},
  };
  EXPECT_EQ(kernel_uses(build(parse(job)), "mem cp_"), want);
}

// Without context parallelism there is no ring and nothing to merge.
TEST(MegatronContextParallel, NoCorrectionsWithoutContextParallelism) {
  const std::string job =
      "model: {num_layers: 2, hidden_size: 1024, num_attention_heads: 8, vocab_size: 5000}\n"
      "training: {seq_length: 2048, micro_batch_size: 1, global_batch_size: 4}\n" +
      cluster(4);
  EXPECT_TRUE(kernel_uses(build(parse(job)), "mem cp_").empty());
}

}  // namespace
}  // namespace prism
