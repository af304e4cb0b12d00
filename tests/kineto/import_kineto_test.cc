// import_kineto: traces of every rank -> a validated graph that replays; role
// sharing; and each way a set of traces is refused.
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "../replay/test_graphs.h"
#include "graph/graph_json.h"
#include "kineto/kineto.h"
#include "kineto_test_util.h"

namespace prism::kineto_test {
namespace {

using ::testing::HasSubstr;

namespace fs = std::filesystem;

class ImportKinetoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // One folder per process: ctest runs this binary's tests side by side.
    dir_ = fs::path(::testing::TempDir()) / ("kineto_import_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path write(const std::string& name, const TraceJson& t) {
    const fs::path p = dir_ / name;
    std::ofstream(p) << t.text();
    return p;
  }
  // One rank of a tp2 x dp2 job: a GEMM, a TP all-reduce, a DP all-reduce.
  TraceJson tp_dp_rank(int rank, std::int64_t dp_bytes = 4096) {
    TraceJson t;
    t.dist(rank, 4);
    const int tp_base = rank - rank % 2;
    t.kernel("sgemm", 10, 50, 7);
    t.kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 70, 20, 20,
             comm_args("allreduce", 1024, "BFloat16", fmt::format("[{}, {}]", tp_base, tp_base + 1),
                       "TENSOR_MODEL_PARALLEL_GROUP", std::to_string(1 + rank / 2)));
    t.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 95, 20, 20,
             comm_args("allreduce", dp_bytes / 4, "Float",
                       fmt::format("[{}, {}]", rank % 2, rank % 2 + 2), "DATA_PARALLEL_GROUP",
                       std::to_string(3 + rank % 2)));
    return t;
  }
  std::string error(const std::vector<fs::path>& files, const KinetoImportOptions& o = {}) {
    Result<ExecutionGraph> g = import_kineto(files, o);
    return g.is_ok() ? "ok" : g.status().message();
  }
  fs::path dir_;
};

TEST_F(ImportKinetoTest, HandWrittenGpuTracesBecomeAGraphThatReplays) {
  Result<ExecutionGraph> g =
      import_kineto({fixture("gpu_rank1.json"), fixture("gpu_rank0.json")}, {});
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_EQ(g->name, "kineto");
  EXPECT_EQ(g->world_size(), 2);
  EXPECT_EQ(g->layout.gpus_per_node(), 8);
  ASSERT_EQ(g->roles.size(), 2u);  // one sends, the other receives
  EXPECT_EQ(g->role_of_rank, (std::vector<std::int32_t>{0, 1}));
  EXPECT_GE(g->find_slot("TENSOR_MODEL_PARALLEL_GROUP"), 0);
  EXPECT_GE(g->find_slot("default_pg"), 0);
  const ReplayResult r = testing::run(*g);
  EXPECT_EQ(r.outcome, ReplayResult::Outcome::kCompleted);
  EXPECT_EQ(r.iteration_times.size(), 2u);
}

TEST_F(ImportKinetoTest, RealTorch113TracesAreRanksInFileOrder) {
  KinetoImportOptions o;
  o.name = "gloo";
  o.gpus_per_node = 1;
  Result<ExecutionGraph> g =
      import_kineto({fixture("cpu113_rank0.json"), fixture("cpu113_rank1.json")}, o);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_EQ(g->name, "gloo");
  EXPECT_EQ(g->world_size(), 2);
  EXPECT_EQ(g->layout.num_nodes(), 2);
  EXPECT_EQ(g->roles.size(), 2u);
  EXPECT_EQ(testing::run(*g).outcome, ReplayResult::Outcome::kCompleted);
}

TEST_F(ImportKinetoTest, EqualProgramsShareARole) {
  std::vector<fs::path> files;
  for (int r = 3; r >= 0; --r) files.push_back(write(fmt::format("r{}.json", r), tp_dp_rank(r)));
  Result<ExecutionGraph> g = import_kineto(files, {});
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  ASSERT_EQ(g->roles.size(), 1u);
  EXPECT_EQ(g->role_of_rank, (std::vector<std::int32_t>{0, 0, 0, 0}));
  const int tp = g->find_slot("TENSOR_MODEL_PARALLEL_GROUP");
  const int dp = g->find_slot("DATA_PARALLEL_GROUP");
  ASSERT_GE(tp, 0);
  ASSERT_GE(dp, 0);
  EXPECT_EQ(g->slots[tp].explicit_groups, (std::vector<std::vector<Rank>>{{0, 1}, {2, 3}}));
  EXPECT_EQ(g->slots[dp].explicit_groups, (std::vector<std::vector<Rank>>{{0, 2}, {1, 3}}));
  EXPECT_EQ(testing::run(*g).outcome, ReplayResult::Outcome::kCompleted);
}

TEST_F(ImportKinetoTest, SameInputSameGraph) {
  const std::vector<fs::path> files = {fixture("gpu_rank0.json"), fixture("gpu_rank1.json")};
  Result<ExecutionGraph> a = import_kineto(files, {});
  Result<ExecutionGraph> b = import_kineto(files, {});
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  ASSERT_EQ(a->roles.size(), b->roles.size());
  for (std::size_t i = 0; i < a->roles.size(); ++i) {
    EXPECT_EQ(a->roles[i].names, b->roles[i].names);
    EXPECT_EQ(a->roles[i].ops.size(), b->roles[i].ops.size());
  }
  EXPECT_EQ(graph_to_json(*a), graph_to_json(*b));
}

TEST_F(ImportKinetoTest, RejectsIncompleteOrInconsistentSets) {
  const fs::path r0 = write("r0.json", tp_dp_rank(0));
  const fs::path r2 = write("r2.json", tp_dp_rank(2));
  EXPECT_EQ(error({r0, r2}),
            "import_kineto: no trace for ranks 1,3 of the world of 4 (2 traces given)");
  EXPECT_EQ(error({r0, r2, r0}),
            fmt::format("{}: rank 0 again (already from {})", r0.string(), r0.string()));
  TraceJson bare;
  bare.kernel("sgemm", 10, 50, 7);
  const fs::path none = write("none.json", bare);
  EXPECT_THAT(error({r0, none}),
              HasSubstr("none.json: no distributedInfo (rank, world_size), but " + r0.string() +
                        " has one"));
  EXPECT_THAT(error({none, r0}), HasSubstr("r0.json: has distributedInfo (rank, world_size), but " +
                                           none.string() + " has none"));
  TraceJson w8 = tp_dp_rank(1);
  w8.dist(1, 8);
  EXPECT_EQ(
      error({r0, write("w8.json", w8)}),
      fmt::format("{}: world size 8, but {} has 4", (dir_ / "w8.json").string(), r0.string()));
  EXPECT_EQ(error({}), "import_kineto: no trace files");
  KinetoImportOptions zero;
  zero.gpus_per_node = 0;
  EXPECT_EQ(error({r0}, zero), "import_kineto: gpus_per_node 0; must be >= 1");
  Result<ExecutionGraph> missing = import_kineto({dir_ / "absent.json"}, {});
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("absent.json: no such file"));
}

TEST_F(ImportKinetoTest, RejectsAWorldBelowOneRank) {
  TraceJson t;
  t.kernel("sgemm", 10, 50, 7);
  KinetoTraceOptions o;
  o.world_size = 0;
  Result<KinetoTrace> r = parse_kineto_trace(t.text(), "t.json", o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(), "t.json: world size 0; must be >= 1");
}

TEST_F(ImportKinetoTest, RejectsRanksThatDisagreeOnACollective) {
  std::vector<fs::path> files;
  for (int r = 0; r < 4; ++r)
    files.push_back(write(fmt::format("r{}.json", r), tp_dp_rank(r, r == 2 ? 8192 : 4096)));
  const std::string e = error(files);
  EXPECT_THAT(e, HasSubstr("kineto: the assembled graph: slot 'DATA_PARALLEL_GROUP'"));
  EXPECT_THAT(e, HasSubstr("r2.json: rank 2"));
}

TEST_F(ImportKinetoTest, RejectsAMalformedTraceNamingIt) {
  std::ofstream(dir_ / "bad.json") << "{\"traceEvents\": [";
  EXPECT_THAT(error({dir_ / "bad.json"}), HasSubstr("bad.json:1:18: "));
}

}  // namespace
}  // namespace prism::kineto_test
