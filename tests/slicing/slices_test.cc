// Slicing: the graph of a whole job from one captured rank per role, the
// check of further captures against their role, the fallback to the
// builder's model, and every refusal.
#include "slicing/slices.h"

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "../replay/test_graphs.h"
#include "../workload/megatron_test_util.h"
#include "graph/role_builder.h"
#include "slicing/slices_grid.h"

namespace prism {
namespace {

using ::testing::HasSubstr;

// 12 ranks: tp 2, dp 2, pp 3 (rank = tp + 2 dp + 4 pp).
JobSpec program_job(const std::string& parallel =
                        "tensor_model_parallel_size: 2, "
                        "pipeline_model_parallel_size: 3") {
  return testing::parse(
      "name: pipe\ncluster: {preset: dgx-h100, num_gpus: 12, node: {gpus: 4}, network: "
      "{nics_per_node: 4}}\nparallelism: {" +
      parallel + "}\n");
}

std::vector<Rank> ranks_where(int stride, int size, Rank r) {  // r's group along one dim
  const Rank base = r - (r / stride % size) * stride;
  std::vector<Rank> out;
  for (int i = 0; i < size; ++i) out.push_back(base + i * stride);
  return out;
}

// What a pipeline stage of the job runs, as a capture of rank `r` would
// give it: `compute` ns of work, tensor-parallel and data-parallel
// all-reduces, activations forward and gradients back, and the first and
// last stage's embedding all-reduce. `extra`: one more all-reduce at the end.
RankProgram stage_program(Rank r, std::int64_t compute = 1000, bool extra = false) {
  const int stage = r / 4;
  RankProgram p;
  p.rank = r;
  p.source = "capture" + std::to_string(r);
  p.comms = {{"c0", ranks_where(1, 2, r)},                        // tp
             {"c1", ranks_where(2, 2, r)}};                       // dp
  if (stage != 1) p.comms.push_back({"c2", {r % 4, r % 4 + 8}});  // first and last stage
  RoleBuilder b("program", {"host", "comm"});
  b.marker(0, MarkerKind::kIteration, 0);
  if (stage > 0) p.peers.push_back(r - 4);
  if (stage < 2) p.peers.push_back(r + 4);
  const int prev = 0;
  const int next = stage > 0 ? 1 : 0;
  if (stage > 0) b.recv(1, prev, Bytes{4096}, 0);
  b.compute(0, SimTime{compute}, "forward");
  b.collective(1, 0, CollectiveKind::kAllReduce, Bytes{1024}, DType::kBFloat16);
  if (stage < 2) b.send(1, next, Bytes{4096}, 0);
  if (stage < 2) b.recv(1, next, Bytes{4096}, 1);
  b.compute(0, SimTime{2 * compute}, "backward");
  if (stage > 0) b.send(1, prev, Bytes{4096}, 1);
  const int a = b.alloc(0, Bytes{1 << 20});
  b.collective(1, 1, CollectiveKind::kAllReduce, Bytes{1 << 20}, DType::kFloat32);
  if (stage != 1) b.collective(1, 2, CollectiveKind::kAllReduce, Bytes{2048}, DType::kFloat32);
  if (extra) b.collective(1, 1, CollectiveKind::kAllReduce, Bytes{8}, DType::kFloat32);
  b.free(0, a);
  b.marker(0, MarkerKind::kIterationEnd, 0);
  p.role = std::move(b).build();
  return p;
}

std::vector<RankProgram> programs(std::initializer_list<Rank> ranks) {
  std::vector<RankProgram> out;
  for (Rank r : ranks) out.push_back(stage_program(r, 1000 * (r + 1)));
  return out;
}

std::vector<std::string> slot_names(const ExecutionGraph& g) {
  std::vector<std::string> out;
  for (const CommSlot& s : g.slots) out.push_back(s.name);
  return out;
}

TEST(SlicesTest, OneCapturePerStageBuildsTheWholeJob) {
  Result<SlicedGraph> s = graph_from_slices(program_job(), nullptr, programs({8, 0, 4}));
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  const ExecutionGraph& g = s.value().graph;
  EXPECT_EQ(g.world_size(), 12);
  ASSERT_EQ(g.roles.size(), 3u);
  EXPECT_EQ(g.roles[1].name, "stage1");
  EXPECT_EQ(g.role_of_rank, (std::vector<std::int32_t>{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2}));
  EXPECT_EQ(slot_names(g), (std::vector<std::string>{"tp", "pp+1", "dp", "pp{0,2}", "pp-1"}));
  const SlotResolver res = g.resolver();
  std::vector<Rank> m;
  res.members(0, 7, &m);
  EXPECT_EQ(m, (std::vector<Rank>{6, 7}));
  m.clear();
  res.members(2, 9, &m);
  EXPECT_EQ(m, (std::vector<Rank>{9, 11}));
  m.clear();
  res.members(3, 3, &m);  // the embedding group of a rank never captured
  EXPECT_EQ(m, (std::vector<Rank>{3, 11}));
  EXPECT_EQ(res.peer(1, 5), 9);
  EXPECT_EQ(res.peer(4, 10), 6);
  // Each stage runs its captured rank's measured compute.
  EXPECT_EQ(g.roles[2].ops[2].duration, SimTime{9000});
  ASSERT_EQ(s.value().roles.size(), 3u);
  EXPECT_EQ(s.value().roles[1].captured, 4);
  EXPECT_EQ(s.value().roles[1].num_ranks, 4);
  // The graph replays to the end, every rank through its iteration.
  const ReplayResult r = testing::run(g, /*fold=*/false);
  EXPECT_EQ(r.outcome, ReplayResult::Outcome::kCompleted);
  EXPECT_GT(r.iteration_time, SimTime{0});
}

TEST(SlicesTest, FurtherCapturesOfARoleAreCheckedAndTheLowestRankIsItsProgram) {
  Result<SlicedGraph> s = graph_from_slices(program_job(), nullptr, programs({7, 4, 8, 3, 0, 5}));
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_EQ(s.value().roles[0].captured, 0);
  EXPECT_EQ(s.value().roles[0].checked, (std::vector<Rank>{3}));
  EXPECT_EQ(s.value().roles[1].checked, (std::vector<Rank>{5, 7}));
  EXPECT_EQ(s.value().graph.roles[0].ops[1].duration, SimTime{1000});
  EXPECT_EQ(format_slice_report(s.value()),
            "pipe: 12 ranks (tp 2, cp 1, dp 2, pp 3), 3 roles\n"
            "  role        ranks  first  program\n"
            "  stage0          4      0  captured rank 0; the same program as captured rank 3\n"
            "  stage1          4      4  captured rank 4; the same program as captured ranks 5,7\n"
            "  stage2          4      8  captured rank 8\n");
}

TEST(SlicesTest, ARankThatRunsAnotherProgramIsReportedWhereItDiffers) {
  std::vector<RankProgram> p = programs({0, 4, 8});
  p.push_back(stage_program(2, 1000, /*extra=*/true));
  Result<SlicedGraph> s = graph_from_slices(program_job(), nullptr, std::move(p));
  ASSERT_FALSE(s.is_ok());
  EXPECT_THAT(s.status().message(),
              HasSubstr("role 'stage0' (a pipeline stage): its ranks do not all run one program"));
  EXPECT_THAT(s.status().message(),
              HasSubstr("rank 2 (capture2) does not run rank 0's program (capture0) moved to its "
                        "place: at their communication, memory or marker op 7, rank 0 has free of "
                        "1048576 bytes, rank 2 has all_reduce of 8 bytes (fp32) on ranks [0,2]; "
                        "to tell which rule of the layout splits it, capture ranks 1,3 too"));
  // A rank whose data-parallel group is another one's differs at that op.
  RankProgram wrong = stage_program(1);
  wrong.comms[1].members = {0, 1};
  p = programs({0, 4, 8});
  p.push_back(std::move(wrong));
  s = graph_from_slices(program_job(), nullptr, std::move(p));
  EXPECT_THAT(s.status().message(), HasSubstr("rank 0 has all_reduce of 1048576 bytes (fp32) on "
                                              "ranks [0,2], rank 1 has all_reduce of 1048576 "
                                              "bytes (fp32) on ranks [0,1]"));
}

// Rank 0 of an 8-rank data-parallel job gathers from every other rank,
// which sends to it (torch.distributed.gather), then all ranks all-reduce.
RankProgram gather_program(Rank r) {
  RankProgram p;
  p.rank = r;
  p.source = "capture" + std::to_string(r);
  p.comms = {{"world", {0, 1, 2, 3, 4, 5, 6, 7}}};
  RoleBuilder b("program", {"host", "comm"});
  b.marker(0, MarkerKind::kIteration, 0);
  b.compute(0, SimTime{1000 + r}, "forward");
  if (r == 0) {
    for (Rank k = 1; k < 8; ++k) {
      p.peers.push_back(k);
      b.recv(1, static_cast<int>(k - 1), Bytes{64}, 0);
    }
  } else {
    p.peers.push_back(0);
    b.send(1, 0, Bytes{64}, 0);
  }
  b.collective(1, 0, CollectiveKind::kAllReduce, Bytes{64}, DType::kFloat32);
  b.marker(0, MarkerKind::kIterationEnd, 0);
  p.role = std::move(b).build();
  return p;
}

std::vector<RankProgram> gather_programs(std::initializer_list<Rank> ranks) {
  std::vector<RankProgram> out;
  for (Rank r : ranks) out.push_back(gather_program(r));
  return out;
}

const char* const kGatherJob = "name: gather\ncluster: {preset: dgx-h100, num_gpus: 8}\n";

TEST(SlicesTest, ARoleWhoseRanksDifferIsSplitByARuleOfTheLayout) {
  const JobSpec job = testing::parse(kGatherJob);
  Result<SlicedGraph> s = graph_from_slices(job, nullptr, gather_programs({7, 0, 6, 1}));
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  const ExecutionGraph& g = s.value().graph;
  ASSERT_EQ(g.roles.size(), 2u);
  EXPECT_EQ(g.roles[0].name, "stage0.first");
  EXPECT_EQ(g.roles[1].name, "stage0.others");
  EXPECT_EQ(g.role_of_rank, (std::vector<std::int32_t>{0, 1, 1, 1, 1, 1, 1, 1}));
  // The senders' peer is anchored at rank 0, not moved with them.
  const SlotResolver res = g.resolver();
  const int to_root = g.find_slot("stage0.others.peer0");
  ASSERT_NE(to_root, kNone);
  for (Rank r = 1; r < 8; ++r) EXPECT_EQ(res.peer(to_root, r), 0) << "rank " << r;
  EXPECT_EQ(format_slice_report(s.value()),
            "gather: 8 ranks (tp 1, cp 1, dp 8, pp 1), 2 roles\n"
            "  role           ranks  first  program\n"
            "  stage0.first       1      0  captured rank 0; one rank; stage0's first rank\n"
            "  stage0.others      7      1  captured rank 1; the same program as captured ranks "
            "6,7; ranks 1-7: stage0's ranks but the first\n"
            "  stage0 is split by its first rank, as rank 1 (capture1) does not run rank 0's "
            "program (capture0) moved to its place: at their communication, memory or marker op "
            "1, rank 0 has recv of 64 bytes from rank 1 (tag 0), rank 1 has send of 64 bytes to "
            "rank 0 (tag 0)\n");
  // The graph replays to the end, folded as unfolded.
  const ReplayResult folded = testing::run(g, /*fold=*/true);
  const ReplayResult unfolded = testing::run(g, /*fold=*/false);
  EXPECT_EQ(unfolded.outcome, ReplayResult::Outcome::kCompleted);
  EXPECT_EQ(folded.iteration_time, unfolded.iteration_time);
}

TEST(SlicesTest, CapturesTooFewToTellHowARoleSplitsNameTheRanksToCapture) {
  const JobSpec job = testing::parse(kGatherJob);
  Result<SlicedGraph> s = graph_from_slices(job, nullptr, gather_programs({0, 7}));
  ASSERT_FALSE(s.is_ok());
  EXPECT_THAT(s.status().message(),
              HasSubstr("role 'stage0' (a pipeline stage): its ranks do not all run one program, "
                        "as the layout's roles assume: rank 7 (capture7) does not run rank 0's "
                        "program (capture0)"));
  EXPECT_THAT(s.status().message(),
              HasSubstr("to tell which rule of the layout splits it, capture ranks 1,6 too"));
  // Two senders alone look like one program; rank 0, the peer they name
  // alike, is asked for.
  s = graph_from_slices(job, nullptr, gather_programs({3, 7}));
  ASSERT_FALSE(s.is_ok());
  EXPECT_THAT(s.status().message(),
              HasSubstr("its captured ranks 3,7 name one peer alike, rank 0, which cannot run "
                        "their program; to tell which rule of the layout splits it, capture rank "
                        "0 too"));
}

TEST(SlicesTest, RefusesMissingRolesDuplicatesAndRanksOutsideTheJob) {
  Result<SlicedGraph> s = graph_from_slices(program_job(), nullptr, programs({0, 8}));
  EXPECT_THAT(s.status().message(),
              HasSubstr("role 'stage1' (4 ranks from rank 4) has no captured rank, and the job has "
                        "no model section to fall back on: capture one of its ranks"));
  std::vector<RankProgram> dup = programs({0, 4, 8});
  dup.push_back(stage_program(4));
  dup.back().source = "again";
  EXPECT_THAT(graph_from_slices(program_job(), nullptr, std::move(dup)).status().message(),
              HasSubstr("again: a second capture of rank 4 (the first: capture4)"));
  std::vector<RankProgram> out = programs({0, 4, 8});
  out.back().rank = 12;
  EXPECT_THAT(graph_from_slices(program_job(), nullptr, std::move(out)).status().message(),
              HasSubstr("capture8: rank 12 is outside job 'pipe' of 12 ranks"));
  std::vector<RankProgram> bad_ref = programs({0, 4, 8});
  bad_ref[1].role.ops[3].ref = 7;
  EXPECT_THAT(graph_from_slices(program_job(), nullptr, std::move(bad_ref)).status().message(),
              HasSubstr("capture4: rank 4 op 3: communicator 7 of 2"));
}

TEST(SlicesTest, AGroupThatDoesNotMoveWithTheGridIsRefused) {
  // Pairs {0,1},{2,3} along a data-parallel dimension of 4: moving rank 0's
  // pair to rank 1 gives {1,2}, which rank 2's own pair contradicts.
  RankProgram p;
  p.rank = 0;
  p.source = "cap";
  p.comms = {{"c0", {0, 1}}};
  RoleBuilder b("program", {"host"});
  b.collective(0, 0, CollectiveKind::kAllReduce, Bytes{64}, DType::kFloat32);
  p.role = std::move(b).build();
  std::vector<RankProgram> v;
  v.push_back(std::move(p));
  const JobSpec job = testing::parse("name: pairs\ncluster: {preset: dgx-h100, num_gpus: 4}\n");
  Result<SlicedGraph> s = graph_from_slices(job, nullptr, std::move(v));
  ASSERT_FALSE(s.is_ok());
  EXPECT_THAT(s.status().message(),
              HasSubstr("communicator [0,1] ('dp{0,1}') does not move with the ranks of the job's "
                        "grid (tp 1, cp 1, dp 4, pp 1)"));
}

TEST(SlicesTest, GroupShapesNameWholeDimensionsStagesAndIrregularGroups) {
  using slices_internal::group_shape;
  const Layout l(12, {{"tp", 2}, {"cp", 1}, {"dp", 2}, {"pp", 3}}, 8);
  const int pp = 3;
  EXPECT_EQ(group_shape(l, {0, 1}, pp).value().name, "tp");
  EXPECT_TRUE(group_shape(l, {0, 1}, pp).value().grid);
  EXPECT_EQ(group_shape(l, {4, 5, 6, 7}, pp).value().name, "tp+dp");
  std::vector<Rank> all(12);
  for (Rank r = 0; r < 12; ++r) all[static_cast<std::size_t>(r)] = r;
  EXPECT_EQ(group_shape(l, all, pp).value().name, "world");
  EXPECT_EQ(group_shape(l, {1, 0}, pp).value().name, "tp-reordered");
  EXPECT_FALSE(group_shape(l, {1, 0}, pp).value().grid);
  EXPECT_EQ(group_shape(l, {2, 10}, pp).value().name, "pp{0,2}");
  EXPECT_EQ(group_shape(l, {5}, pp).value().name, "self");
  // Irregular groups: named by their least move, the same from any rank.
  const std::string a = group_shape(l, {0, 3}, pp).value().name;
  EXPECT_THAT(a, HasSubstr("group-"));
  EXPECT_EQ(group_shape(l, {1, 2}, pp).value().name, a);
  EXPECT_NE(group_shape(l, {0, 7}, pp).value().name, a);
  EXPECT_EQ(slices_internal::move(l, 3, 0, 6), 5);  // tp 1 dp 1 moved by tp 0 dp 1 pp 1
  // The root of a gather, rank 1 (tp 1 dp 0) as rank 3 (tp 1 dp 1) names
  // it: anchored for rank 7 (tp 1 dp 3) it keeps dp 0; moved it shifts.
  const Layout l4(8, {{"tp", 2}, {"cp", 1}, {"dp", 4}, {"pp", 1}}, 8);
  EXPECT_EQ(slices_internal::anchor(l4, 1, 3, 7), 1);
  EXPECT_EQ(slices_internal::move(l4, 1, 3, 7), 5);
  EXPECT_EQ(slices_internal::anchor(l4, 2, 3, 5), 4);  // tp 0 dp 1 as tp 1 dp 1: tp kept
}

TEST(SlicesTest, ProgramLayoutSplitsDataParallelismForExperts) {
  Result<Layout> l = program_layout(
      testing::parse("cluster: {preset: dgx-h100, num_gpus: 16}\nparallelism: "
                     "{expert_model_parallel_size: 4, pipeline_model_parallel_size: 2}\n"));
  ASSERT_TRUE(l.is_ok()) << l.status().message();
  std::vector<std::string> names;
  for (const GridDim& d : l.value().dims()) names.push_back(d.name + std::to_string(d.size));
  EXPECT_EQ(names, (std::vector<std::string>{"tp1", "cp1", "ep4", "edp2", "pp2"}));
  Result<Layout> bad = program_layout(
      testing::parse("cluster: {preset: dgx-h100, num_gpus: 12, node: {gpus: 4}, network: "
                     "{nics_per_node: 4}}\nparallelism: {expert_model_parallel_size: 4, "
                     "expert_tensor_parallel_size: 1, tensor_model_parallel_size: 2}\n"));
  ASSERT_FALSE(bad.is_ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("a program's experts must divide"));
}

// A captured rank's program as a trace would give it: the builder's role
// with each slot it uses turned into the rank's communicator or peer.
RankProgram program_of(const ExecutionGraph& g, Rank r) {
  RankProgram p;
  p.rank = r;
  p.source = "role of rank " + std::to_string(r);
  p.role = g.roles[static_cast<std::size_t>(g.role_of_rank[static_cast<std::size_t>(r)])];
  const SlotResolver res = g.resolver();
  std::map<int, int> comm_of_slot;
  for (std::size_t s = 0; s < g.slots.size(); ++s) {
    const int si = static_cast<int>(s);
    if (g.slots[s].kind == CommSlot::Kind::kGroup && res.group_id(si, r) != kNone) {
      comm_of_slot[si] = static_cast<int>(p.comms.size());
      p.comms.push_back({g.slots[s].name, {}});
      res.members(si, r, &p.comms.back().members);
    }
  }
  for (Op& op : p.role.ops) {
    if (op.kind == OpKind::kCollective) op.ref = comm_of_slot.at(op.ref);
    if (op.kind == OpKind::kSend || op.kind == OpKind::kRecv) {
      const Rank peer = res.peer(op.ref, r);
      const auto it = std::find(p.peers.begin(), p.peers.end(), peer);
      op.ref = static_cast<int>(it - p.peers.begin());
      if (it == p.peers.end()) p.peers.push_back(peer);
    }
  }
  return p;
}

TEST(SlicesTest, UncapturedRolesFallBackToTheModelAndCapturedOnesMeetItsCommunicators) {
  const JobSpec job = testing::parse(
      "name: gpt\nmodel: {num_layers: 4, hidden_size: 256, num_attention_heads: 8, vocab_size: "
      "1000}\ntraining: {seq_length: 256, micro_batch_size: 1, global_batch_size: 8}\n"
      "parallelism: {tensor_model_parallel_size: 2, pipeline_model_parallel_size: 2}\n" +
      testing::cluster(8));
  const BuiltJob built = testing::build(job);
  const ExecutionGraph& model = built.graph;
  ASSERT_EQ(model.roles.size(), 2u);
  std::vector<RankProgram> captured;
  captured.push_back(program_of(model, 2));  // stage 0, tp 0, dp 1
  Result<SlicedGraph> s = graph_from_slices(job, &model, std::move(captured));
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  const ExecutionGraph& g = s.value().graph;
  // The captured stage uses the builder's own slots: its program is the
  // builder's, op for op.
  ASSERT_EQ(g.slots.size(), model.slots.size());
  ASSERT_EQ(g.roles[0].ops.size(), model.roles[0].ops.size());
  for (std::size_t i = 0; i < g.roles[0].ops.size(); ++i)
    ASSERT_EQ(g.roles[0].ops[i].ref, model.roles[0].ops[i].ref) << "op " << i;
  EXPECT_EQ(s.value().roles[0].captured, 2);
  EXPECT_EQ(s.value().roles[1].captured, kNone);
  EXPECT_THAT(
      format_slice_report(s.value()),
      HasSubstr("stage1          4      4  modelled: no rank captured; the builder's model"));
  EXPECT_EQ(testing::run(g).iteration_time, testing::run(model).iteration_time);
}

TEST(SlicesTest, ReadsTheCaptureFilesOfADirectory) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("prism-slices-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
  };
  EXPECT_THAT(read_slices(dir.string(), 4).status().message(), HasSubstr("no capture files"));
  write("report.json", "{\"format\":\"prism-emulate-report\"}");
  write("notes.txt", "not json");
  write("rank1.json",
        "{\"format\":\"prism-capture\",\"version\":1,\"events\":[{\"type\":\"hello\",\"rank\":1,"
        "\"world_size\":4},{\"type\":\"bye\",\"at\":5}]}");
  Result<std::vector<RankProgram>> r = read_slices(dir.string(), 4);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r.value().size(), 1u);
  EXPECT_EQ(r.value()[0].rank, 1);
  write("zz.json", "{\"format\":");
  EXPECT_THAT(read_slices(dir.string(), 4).status().message(),
              HasSubstr("zz.json:1:11: malformed JSON: the text ends before"));
  std::filesystem::remove_all(dir);
  EXPECT_THAT(read_slices(dir.string(), 4).status().message(), HasSubstr(dir.string()));
}

}  // namespace
}  // namespace prism
