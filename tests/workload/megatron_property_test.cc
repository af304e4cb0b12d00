// Property of build_megatron() over random small jobs: every built graph
// replays to completion, folded and unfolded alike, with balanced memory
// (testing::check_random_job), and the seed draws every feature.
#include "workload/megatron.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "graph/graph_json.h"
#include "workload/job_yaml.h"
#include "workload/megatron_shapes.h"
#include "workload/model_stats.h"

#include "megatron_test_util.h"

namespace prism {
namespace {

using testing::build;
using testing::check_random_job;
using testing::cluster;
using testing::gpt;
using testing::h100;
using testing::parse;
using testing::replay_on_cluster;
using testing::unfreed;

// ---------------------------------------------------------------------------
// Property: random small jobs build, replay to completion on their cluster,
// fold exactly and balance their memory.

struct RandomJob {
  std::string yaml;
  std::string summary;
};

RandomJob random_job(std::mt19937* rng) {
  auto pick = [&](std::initializer_list<int> values) {
    std::vector<int> v(values);
    return v[std::uniform_int_distribution<std::size_t>(0, v.size() - 1)(*rng)];
  };
  const int tp = pick({1, 2, 4}), cp = pick({1, 2}), pp = pick({1, 2, 4});
  int dp = pick({1, 2, 4});
  while (tp * cp * pp * dp > 64 && dp > 1) dp /= 2;
  const int vpp = pp > 1 ? pick({1, 2}) : 1;
  const bool is_moe = pick({0, 1}) == 1;
  const int ep = is_moe ? pick({1, 2, 4}) : 1;
  const bool sp = pick({0, 1}) == 1 || (ep > 1 && tp > 1);
  const char* recompute[] = {"none", "selective", "full"};
  const bool dist = pick({0, 1}) == 1;
  const bool grad_overlap = pick({0, 1}) == 1;
  const bool param_overlap = dist && grad_overlap && pick({0, 1}) == 1;
  const int layers = pp * vpp * pick({1, 2});
  const int hidden = pick({256, 512, 1024});
  const int seq = pick({256, 512, 1024, 2048});
  const int m = vpp > 1 ? pp * pick({1, 2}) : pick({1, 2, 3, 4});
  std::string model = "model: {num_layers: " + std::to_string(layers) +
                      ", hidden_size: " + std::to_string(hidden) +
                      ", num_attention_heads: 8, vocab_size: 5000";
  if (is_moe) {
    model +=
        ", activation: swiglu, normalization: RMSNorm, num_moe_experts: 8, "
        "moe_router_topk: 2, moe_ffn_hidden_size: " +
        std::to_string(hidden);
  }
  if (pick({0, 1}) == 1) model += ", num_query_groups: 4";
  model += "}\n";
  RandomJob j;
  j.yaml = model + "training: {seq_length: " + std::to_string(seq) +
           ", global_batch_size: " + std::to_string(m * dp) +
           ", recompute: " + recompute[pick({0, 1, 2})] +
           ", use_distributed_optimizer: " + (dist ? "true" : "false") +
           ", overlap_grad_reduce: " + (grad_overlap ? "true" : "false") +
           ", overlap_param_gather: " + (param_overlap ? "true" : "false") +
           ", bucket_size: " + std::to_string(pick({0, 1000000})) + "}\n" +
           "parallelism: {tensor_model_parallel_size: " + std::to_string(tp) +
           ", sequence_parallel: " + (sp ? "true" : "false") +
           ", context_parallel_size: " + std::to_string(cp) +
           ", pipeline_model_parallel_size: " + std::to_string(pp) +
           ", virtual_pipeline_model_parallel_size: " + std::to_string(vpp) +
           ", expert_model_parallel_size: " + std::to_string(ep) + "}\n" +
           cluster(tp * cp * pp * dp);
  return j;
}

TEST(MegatronProperty, RandomJobsReplayFoldAndBalanceMemory) {
  std::mt19937 rng(20240611);
  int built = 0, rejected = 0;
  std::map<std::string, int> coverage;  // jobs with each feature on
  while (built < 50) {
    const RandomJob rj = random_job(&rng);
    Result<JobSpec> job = parse_job_yaml(rj.yaml, "<random>");
    if (!job.is_ok()) {
      ++rejected;
      ASSERT_LT(rejected, 200) << "too many invalid random jobs; last: " << job.status().message();
      continue;
    }
    check_random_job(job.value(), rj.yaml);
    ++built;
    const JobSpec& j = job.value();
    coverage["tp"] += j.tp() > 1;
    coverage["sp"] += j.parallelism.sequence_parallel;
    coverage["cp"] += j.cp() > 1;
    coverage["pp"] += j.pp() > 1;
    coverage["vpp"] += j.vpp() > 1;
    coverage["dp"] += j.dp() > 1;
    coverage["moe"] += j.model.is_moe();
    coverage["ep"] += j.ep() > 1;
    coverage["full"] += j.training.recompute == Recompute::kFull;
    coverage["dist"] += j.training.use_distributed_optimizer;
    coverage["grad_overlap"] += j.training.overlap_grad_reduce;
    coverage["param_overlap"] += j.training.overlap_param_gather;
    if (::testing::Test::HasFatalFailure()) return;
  }
  // The seed draws every feature at least twice.
  for (const auto& [feature, jobs] : coverage) EXPECT_GE(jobs, 2) << feature;
  EXPECT_EQ(coverage.size(), 12u);
}

}  // namespace
}  // namespace prism
