// The search space: lists as the command line gives them, defaults from the
// job, enumeration under Megatron's rules (validate_job) and the errors of a
// space with nothing valid in it.
#include "planning/search_space.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "workload/job_yaml.h"

namespace prism {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// 16 H100s, 4 layers, 16 heads, sequence 2048, global batch 16: the CLI's
// small job (tests/cli/data/job_small.yaml).
JobSpec small_job() {
  Result<JobSpec> j = load_job_yaml(PRISM_SOURCE_DIR "/tests/cli/data/job_small.yaml");
  EXPECT_TRUE(j.is_ok()) << j.status().message();
  return std::move(j).value();
}

TEST(SearchSpaceTest, IntListsTakeValuesAndRanges) {
  Result<std::vector<int>> v = parse_int_list("8,1-3,2", "--tp");
  ASSERT_TRUE(v.is_ok()) << v.status().message();
  EXPECT_THAT(v.value(), ElementsAre(1, 2, 3, 8));
  EXPECT_THAT(parse_int_list("16", "--pp").value(), ElementsAre(16));
}

TEST(SearchSpaceTest, MalformedIntListsNameTheOption) {
  EXPECT_THAT(parse_int_list("", "--tp").status().message(),
              HasSubstr("--tp: '' has an empty item"));
  EXPECT_THAT(parse_int_list("1,,2", "--tp").status().message(),
              HasSubstr("--tp: '1,,2' has an empty item"));
  EXPECT_THAT(parse_int_list("two", "--pp").status().message(),
              HasSubstr("--pp: 'two' is not a positive integer"));
  EXPECT_THAT(parse_int_list("0-4", "--pp").status().message(),
              HasSubstr("--pp: '0' is not a positive integer"));
  EXPECT_THAT(parse_int_list("1-", "--cp").status().message(),
              HasSubstr("--cp: '' is not a positive integer"));
  EXPECT_THAT(parse_int_list("8-2", "--vpp").status().message(),
              HasSubstr("--vpp: range '8-2' runs backwards (8 > 2)"));
  EXPECT_THAT(parse_int_list("99999999", "--ep").status().message(),
              HasSubstr("--ep: 99999999 is above 4194304"));
}

TEST(SearchSpaceTest, SwitchAndRecomputeLists) {
  EXPECT_THAT(parse_switch_list("on,off", "--x").value(), ElementsAre(false, true));
  EXPECT_THAT(parse_switch_list("true", "--x").value(), ElementsAre(true));
  EXPECT_THAT(parse_switch_list("yes", "--distributed-optimizer").status().message(),
              HasSubstr("--distributed-optimizer: 'yes' is neither on nor off"));
  EXPECT_THAT(parse_recompute_list("full,none", "--recompute").value(),
              ElementsAre(Recompute::kNone, Recompute::kFull));
  EXPECT_THAT(parse_recompute_list("all", "--recompute").status().message(),
              HasSubstr("--recompute: 'all' is not a recompute granularity"));
}

TEST(SearchSpaceTest, DefaultsComeFromTheJob) {
  const JobSpec job = small_job();
  Result<SearchAxes> a = search_axes({}, job);
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  EXPECT_THAT(a.value().tp, ElementsAre(1, 2, 4, 8));  // a node's 8 GPUs
  EXPECT_THAT(a.value().pp, ElementsAre(1, 2, 3, 4));  // up to the 4 layers
  EXPECT_EQ(a.value().vpp.size(), 8u);
  EXPECT_THAT(a.value().cp, ElementsAre(1, 2, 4, 8));
  EXPECT_THAT(a.value().ep, ElementsAre(1));  // dense
  EXPECT_THAT(a.value().mbs, ElementsAre(1, 2, 4));
  EXPECT_EQ(a.value().recompute.size(), 3u);
  EXPECT_THAT(a.value().distributed_optimizer, ElementsAre(true));
  EXPECT_THAT(a.value().overlap_grad_reduce, ElementsAre(true));
  EXPECT_TRUE(a.value().overlap_param_gather.empty());  // follows the distributed optimizer
  SearchAxesText t;
  t.tp = "2";
  t.recompute = "bogus";
  EXPECT_THAT(search_axes(t, job).status().message(), HasSubstr("--recompute: 'bogus'"));
}

SearchAxes narrow(const JobSpec& job) {
  SearchAxesText t;
  t.tp = "1,2,3";
  t.pp = "1-4";
  t.vpp = "1,2";
  t.cp = "1";
  t.mbs = "1";
  t.recompute = "none";
  Result<SearchAxes> a = search_axes(t, job);
  EXPECT_TRUE(a.is_ok()) << a.status().message();
  return std::move(a).value();
}

TEST(SearchSpaceTest, EnumerationKeepsWhatMegatronAccepts) {
  const JobSpec job = small_job();
  Result<SearchSpace> s = enumerate_space(narrow(job), job);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  // 3 tp x 4 pp x 2 vpp; valid: tp 1 or 2 with pp 1, 2 or 4 (layers and
  // GPUs), vpp 2 only at pp 2 (4 layers / pp 4 = 1 per stage).
  EXPECT_EQ(s.value().combinations, 24);
  std::vector<std::string> valid;
  for (const SearchConfig& c : s.value().valid) valid.push_back(to_string(c));
  EXPECT_THAT(valid, ElementsAre("tp=1 pp=1 vpp=1 cp=1 ep=1 mbs=1 recompute=none dist-opt=on "
                                 "overlap=grad+param",
                                 "tp=1 pp=2 vpp=1 cp=1 ep=1 mbs=1 recompute=none dist-opt=on "
                                 "overlap=grad+param",
                                 "tp=1 pp=2 vpp=2 cp=1 ep=1 mbs=1 recompute=none dist-opt=on "
                                 "overlap=grad+param",
                                 "tp=1 pp=4 vpp=1 cp=1 ep=1 mbs=1 recompute=none dist-opt=on "
                                 "overlap=grad+param",
                                 "tp=2 sp pp=1 vpp=1 cp=1 ep=1 mbs=1 recompute=none dist-opt=on "
                                 "overlap=grad+param",
                                 "tp=2 sp pp=2 vpp=1 cp=1 ep=1 mbs=1 recompute=none dist-opt=on "
                                 "overlap=grad+param",
                                 "tp=2 sp pp=2 vpp=2 cp=1 ep=1 mbs=1 recompute=none dist-opt=on "
                                 "overlap=grad+param",
                                 "tp=2 sp pp=4 vpp=1 cp=1 ep=1 mbs=1 recompute=none dist-opt=on "
                                 "overlap=grad+param"));
  EXPECT_EQ(s.value().rejected.size(), 16u);
  // The first rejection: tp 1, pp 1, vpp 2.
  EXPECT_THAT(s.value().rejected.front().reason,
              HasSubstr("virtual_pipeline_model_parallel_size: 2 needs "
                        "pipeline_model_parallel_size > 1"));
  // Every rejection carries validate_job's reason for that configuration.
  for (const RejectedConfig& r : s.value().rejected)
    EXPECT_EQ(r.reason, validate_job(apply_config(job, r.config)).message());
}

TEST(SearchSpaceTest, SequenceParallelismAtTp1IsOneConfiguration) {
  const JobSpec job = small_job();
  SearchAxesText t;
  t.tp = "1";
  t.pp = "2";
  t.vpp = "1";
  t.cp = "1";
  t.mbs = "1";
  t.recompute = "none";
  t.sequence_parallel = "on,off";
  Result<SearchSpace> s = enumerate_space(search_axes(t, job).value(), job);
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(s.value().combinations, 1);
  EXPECT_FALSE(s.value().valid.front().sequence_parallel);
}

TEST(SearchSpaceTest, ParamGatherFollowsTheDistributedOptimizerByDefault) {
  const JobSpec job = small_job();  // overlap_param_gather: true
  SearchAxesText t;
  t.tp = "2";
  t.pp = "2";
  t.vpp = "1";
  t.cp = "1";
  t.mbs = "1";
  t.recompute = "none";
  t.distributed_optimizer = "on,off";
  Result<SearchSpace> s = enumerate_space(search_axes(t, job).value(), job);
  ASSERT_TRUE(s.is_ok());
  ASSERT_EQ(s.value().valid.size(), 2u);
  EXPECT_FALSE(s.value().valid[0].distributed_optimizer);
  EXPECT_FALSE(s.value().valid[0].overlap_param_gather);
  EXPECT_TRUE(s.value().valid[1].overlap_param_gather);
  // Asked for explicitly, Megatron's rule rejects it without the optimizer.
  t.overlap_param_gather = "on";
  s = enumerate_space(search_axes(t, job).value(), job);
  ASSERT_TRUE(s.is_ok());
  ASSERT_EQ(s.value().valid.size(), 1u);
  EXPECT_THAT(s.value().rejected.front().reason,
              HasSubstr("overlap_param_gather: needs training.use_distributed_optimizer"));
}

TEST(SearchSpaceTest, AnOptionNoConfigurationSatisfiesIsNamed) {
  const JobSpec job = small_job();
  SearchAxesText t;
  t.tp = "3";
  // The job's other sizes (pp 2, cp 1) stay: validate_job's first reason.
  EXPECT_EQ(enumerate_space(search_axes(t, job).value(), job).status().message(),
            "--tp 3: cluster.num_gpus: 16 is not divisible by "
            "parallelism.tensor_model_parallel_size 3 * pipeline_model_parallel_size 2 * "
            "context_parallel_size 1 = 6");
  t.tp = "3,5";
  EXPECT_THAT(enumerate_space(search_axes(t, job).value(), job).status().message(),
              HasSubstr("--tp 3,5: no value gives a valid configuration of this job (--tp 3: "
                        "cluster.num_gpus: 16 is not divisible"));
  t.tp = "6";  // divides neither the 16 GPUs nor the 16 heads
  t.pp = "1";
  t.cp = "1";
  EXPECT_THAT(enumerate_space(search_axes(t, job).value(), job).status().message(),
              HasSubstr("--tp 6: "));
  t = {};
  t.cp = "3";
  EXPECT_THAT(enumerate_space(search_axes(t, job).value(), job).status().message(),
              HasSubstr("--cp 3: "));
  t = {};
  t.mbs = "3";  // global batch 16
  EXPECT_THAT(enumerate_space(search_axes(t, job).value(), job).status().message(),
              HasSubstr("--mbs 3: training.global_batch_size: 16 is not divisible"));
}

TEST(SearchSpaceTest, AnEmptyCombinationSaysWhy) {
  // tp 4 and pp 4 are each fine alone (16 GPUs), not together with cp 2.
  const JobSpec job = small_job();
  SearchAxesText t;
  t.tp = "4";
  t.pp = "4";
  t.cp = "2";
  t.vpp = "1";
  t.mbs = "1";
  t.recompute = "none";
  Result<SearchSpace> s = enumerate_space(search_axes(t, job).value(), job);
  ASSERT_FALSE(s.is_ok());
  EXPECT_THAT(s.status().message(),
              HasSubstr("the search space has no valid configuration: all 1 combinations are "
                        "rejected (the first, tp=4 sp pp=4 vpp=1 cp=2"));
  EXPECT_THAT(s.status().message(), HasSubstr("cluster.num_gpus: 16 is not divisible"));
}

TEST(SearchSpaceTest, AHugeSpaceIsRefused) {
  const JobSpec job = small_job();
  SearchAxesText t;
  t.tp = "1-4000";
  t.pp = "1-4000";
  Result<SearchAxes> a = search_axes(t, job);
  ASSERT_TRUE(a.is_ok());
  EXPECT_THAT(enumerate_space(a.value(), job).status().message(),
              HasSubstr("more than 10000000 combinations"));
}

TEST(SearchSpaceTest, ApplyConfigKeepsTheGlobalBatchAndTurnsSpOffAtTp1) {
  const JobSpec job = small_job();
  SearchConfig c = config_of(job);
  EXPECT_EQ(c.tp, 2);
  EXPECT_TRUE(c.sequence_parallel);
  c.tp = 1;
  c.mbs = 2;
  const JobSpec j = apply_config(job, c);
  EXPECT_EQ(j.training.global_batch_size, 16);
  EXPECT_FALSE(j.parallelism.sequence_parallel);
  EXPECT_EQ(j.dp(), 8);
  EXPECT_EQ(j.num_microbatches(), 1);
}

// A job's recompute method and layers go with its own full recompute: a
// searched recompute starts from Megatron's uniform, one layer; the job's own
// keeps them.
TEST(SearchSpaceTest, ApplyConfigKeepsTheRecomputeMethodOnlyWithItsRecompute) {
  JobSpec job = small_job();
  job.training.recompute = Recompute::kFull;
  job.training.recompute_method = RecomputeMethod::kBlock;
  job.training.recompute_num_layers = 1;
  ASSERT_TRUE(validate_job(job).is_ok()) << validate_job(job).message();
  SearchConfig c = config_of(job);
  EXPECT_EQ(apply_config(job, c).training.recompute_method, RecomputeMethod::kBlock);
  c.recompute = Recompute::kSelective;
  const JobSpec j = apply_config(job, c);
  EXPECT_EQ(j.training.recompute_method, RecomputeMethod::kUnset);
  EXPECT_EQ(j.training.recompute_num_layers, 0);
  EXPECT_TRUE(validate_job(j).is_ok()) << validate_job(j).message();
}

}  // namespace
}  // namespace prism
