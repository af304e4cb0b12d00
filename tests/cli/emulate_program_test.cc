// The README's demo, asserted: an unmodified PyTorch DDP program
// (examples/ddp_gpt/train.py) as one real rank of a 64-rank emulated job
// whose job spec has no model: `prism emulate` captures the program, builds
// the graph of all 64 ranks from it, and emulates. The real rank must issue
// exactly the graph's collectives and bytes, and the emulated iteration time
// must be reported. And a pipeline (examples/pipeline_gpt/train.py) whose
// graph is built from one captured rank per stage. Skipped where torch or
// PrismLLM's backend is missing.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "python_program_test.h"
#include "run_prism.h"

namespace prism {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::run_prism;
using testing::RunResult;
using testing::slurp;
namespace fs = std::filesystem;

using testing::kPython;

class EmulateProgramTest : public testing::PythonProgramTest {};

TEST_F(EmulateProgramTest, DdpGptRunsAsOneRealRankOfSixtyFour) {
  const RunResult r = run_prism(
      {"emulate", "examples/jobs/ddp-gpt-64.yaml", "--real-ranks", "0", "--master-port", "0",
       "--report", "{tmp}/r.json", "--save-graph", "{tmp}/g.json", "--capture", "{tmp}/cap",
       "--slices", "{tmp}/slices", "--", kPython, "examples/ddp_gpt/train.py", "--steps", "3"},
      tmp_);
  ASSERT_EQ(r.exit_status, 0) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("prism emulate: capturing role 1 of 1 (stage0, 64 ranks): rank 0"));
  EXPECT_THAT(r.out, HasSubstr("[rank0]: gpt: "));
  EXPECT_THAT(r.out, HasSubstr("job:                ddp-gpt-64 (64 ranks), 1 real"));
  EXPECT_THAT(r.out, HasSubstr("iteration time:     "));

  const auto report = nlohmann::json::parse(slurp(tmp_ + "/r.json"));
  ASSERT_EQ(report["real_ranks"].size(), 1u);
  const auto& rank = report["real_ranks"][0];
  EXPECT_GT(report["iteration_time_s"].get<double>(), 0);
  EXPECT_GT(rank["iteration_time_s"].get<double>(), 0);
  EXPECT_GT(rank["predicted_iteration_time_s"].get<double>(), 0);
  EXPECT_EQ(rank["iterations"], 2);                 // 3 optimizer steps: 2 complete iterations
  ASSERT_EQ(rank["iteration_times_s"].size(), 2u);  // each one's, their mean the figure
  const double sum =
      rank["iteration_times_s"][0].get<double>() + rank["iteration_times_s"][1].get<double>();
  EXPECT_NEAR(sum / 2, rank["iteration_time_s"].get<double>(), 2e-9);
  EXPECT_EQ(rank["exit_code"], 0);
  // What the real rank issued is the graph's, op for op and byte for byte.
  EXPECT_GT(rank["ops"].get<int>(), 3);  // DDP's start-up, then its buckets each step
  EXPECT_EQ(rank["ops"], rank["graph_ops"]);
  EXPECT_EQ(rank["bytes"], rank["graph_bytes"]);

  // The graph: one role for all 64 ranks, its collectives those counted.
  const auto graph = nlohmann::json::parse(slurp(tmp_ + "/g.json"));
  int collectives = 0;
  std::int64_t bytes = 0;
  ASSERT_EQ(graph["roles"].size(), 1u);
  for (const auto& op : graph["roles"][0]["ops"]) {
    if (op["kind"] != "collective") continue;
    ++collectives;
    bytes += op["bytes"].get<std::int64_t>();
  }
  EXPECT_EQ(rank["ops"].get<int>(), collectives);
  EXPECT_EQ(rank["bytes"].get<std::int64_t>(), bytes);
  EXPECT_TRUE(fs::exists(tmp_ + "/slices/slice-rank0.json"));
  EXPECT_TRUE(fs::exists(tmp_ + "/cap/rank0.json"));
}

// DTensor tensor parallelism on a (dp 2, tp 8) device mesh: tp rank 5 is
// captured and runs against the graph built from it, op for op. Each rank
// keeps its own shard of the weights (train.py: src_data_rank=None); a
// scatter from tp rank 0 would be point-to-point that one captured rank
// cannot mirror for the others.
TEST_F(EmulateProgramTest, TensorParallelGptRunsAsOneRealRankOfItsMesh) {
  std::vector<std::string> args;
  for (const char* a :
       {"emulate", "examples/jobs/cuda-gpt-tp8-1024.yaml", "--set", "cluster.num_gpus=16",
        "--real-ranks", "5", "--master-port", "0", "--report", "{tmp}/r.json", "--"})
    args.emplace_back(a);
  args.push_back(kPython);
  for (const char* a :
       {"examples/cuda_gpt/train.py", "--device=cpu", "--parallel=tp", "--steps=3", "--layers=1",
        "--dim=128", "--heads=8", "--vocab=512", "--seq=64", "--batch=2"})
    args.emplace_back(a);
  const RunResult r = run_prism(args, tmp_);
  ASSERT_EQ(r.exit_status, 0) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("capturing role 1 of 1 (stage0, 16 ranks): rank 5"));
  const auto report = nlohmann::json::parse(slurp(tmp_ + "/r.json"));
  ASSERT_EQ(report["real_ranks"].size(), 1u);
  const auto& rank = report["real_ranks"][0];
  EXPECT_EQ(rank["exit_code"], 0);
  EXPECT_EQ(rank["iterations"], 2);
  EXPECT_GT(rank["ops"].get<int>(), 3);
  EXPECT_EQ(rank["ops"], rank["graph_ops"]);
  EXPECT_EQ(rank["bytes"], rank["graph_bytes"]);
}

// Runs `prism emulate JOB --real-ranks RANK` on PROGRAM with one torch
// thread (as torchrun sets OMP_NUM_THREADS=1: two OpenMP threads beside the
// backend's progress thread on two cores made FSDP2's steps 40 times
// slower) and checks what every program test asks: it completes, the real
// rank issued the graph's ops and bytes, and the report gives the emulated
// and the predicted iteration. Returns the report's real rank; the graph in
// `graph`, and what the run printed in `output` when given.
nlohmann::json emulate_program(const std::string& tmp, const std::string& job, int rank,
                               std::vector<std::string> program, nlohmann::json* graph,
                               const std::vector<std::string>& options = {},
                               std::string* output = nullptr) {
  std::vector<std::string> args = {
      "emulate", job,        "--real-ranks", std::to_string(rank), "--master-port",
      "0",       "--report", "{tmp}/r.json", "--save-graph",       "{tmp}/g.json"};
  args.insert(args.end(), options.begin(), options.end());
  for (const char* a : {"--", "env", "OMP_NUM_THREADS=1"}) args.emplace_back(a);
  args.push_back(kPython);
  args.insert(args.end(), program.begin(), program.end());
  const RunResult r = run_prism(args, tmp);
  if (output) *output = r.out + r.err;
  EXPECT_EQ(r.exit_status, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("iteration time:     "));
  EXPECT_THAT(r.out, HasSubstr("the replay without real ranks predicts"));
  const auto report = nlohmann::json::parse(slurp(tmp + "/r.json"), nullptr, false);
  if (report.is_discarded() || report["real_ranks"].size() != 1) {
    ADD_FAILURE() << "no report of one real rank: " << r.out << r.err;
    return {};
  }
  *graph = nlohmann::json::parse(slurp(tmp + "/g.json"));
  const auto& real = report["real_ranks"][0];
  EXPECT_EQ(real["rank"], rank);
  EXPECT_EQ(real["exit_code"], 0);
  EXPECT_EQ(real["iterations"], 2);
  EXPECT_GT(real["ops"].get<int>(), 3);
  EXPECT_EQ(real["ops"], real["graph_ops"]);
  EXPECT_EQ(real["bytes"], real["graph_bytes"]);
  EXPECT_GT(real["iteration_time_s"].get<double>(), 0);
  EXPECT_GT(real["predicted_iteration_time_s"].get<double>(), 0);
  return real;
}

// How many communication ops of each kind role `role` of a graph has: its
// collectives by name, "send" and "recv".
std::map<std::string, int> comm_ops_of(const nlohmann::json& graph, std::size_t role) {
  std::map<std::string, int> n;
  for (const auto& op : graph["roles"][role]["ops"]) {
    const std::string kind = op["kind"];
    if (kind == "collective") ++n[op["collective"].get<std::string>()];
    if (kind == "send" || kind == "recv") ++n[kind];
  }
  return n;
}

// FSDP2 (fully_shard per block, then the model) as rank 7 of 64: each step
// all-gathers every unit's parameters and reduce-scatters its gradients
// over all 64 ranks, through all_gather_into_tensor and
// reduce_scatter_tensor.
TEST_F(EmulateProgramTest, Fsdp2GptRunsAsOneRealRankOfSixtyFour) {
  nlohmann::json graph;
  const auto rank = emulate_program(
      tmp_, "examples/jobs/fsdp-gpt-64.yaml", 7,
      {"examples/cuda_gpt/train.py", "--device=cpu", "--parallel=fsdp", "--steps=3", "--layers=2",
       "--dim=64", "--heads=4", "--vocab=256", "--seq=32", "--batch=2"},
      &graph);
  ASSERT_FALSE(rank.is_null());
  ASSERT_EQ(graph["roles"].size(), 1u);
  auto n = comm_ops_of(graph, 0);
  // 3 units (2 blocks, the root) per step: forward all-gathers (the root's
  // once, it stays unsharded after forward), backward's re-gathers of the
  // blocks, and a reduce-scatter per unit.
  EXPECT_GE(n["all_gather"], 9);
  EXPECT_EQ(n["reduce_scatter"], 9);
}

// DTensor tensor parallelism with sequence parallelism (SequenceParallel
// LayerNorms, parallelize_module) on a (dp 8, tp 8) mesh, as rank 13 of 64:
// the sequence all-gathers and reduce-scatters of each block over its tp
// group, the dp all-reduces by hand.
TEST_F(EmulateProgramTest, TensorAndSequenceParallelGptRunsAsOneRealRankOfSixtyFour) {
  nlohmann::json graph;
  const auto rank = emulate_program(
      tmp_, "examples/jobs/tp-sp-gpt-64.yaml", 13,
      {"examples/cuda_gpt/train.py", "--device=cpu", "--parallel=tp", "--sequence-parallel",
       "--steps=3", "--layers=2", "--dim=64", "--heads=8", "--vocab=256", "--seq=32", "--batch=2"},
      &graph);
  ASSERT_FALSE(rank.is_null());
  auto n = comm_ops_of(graph, 0);
  EXPECT_GT(n["all_gather"], 0);
  EXPECT_GT(n["reduce_scatter"], 0);
  EXPECT_GT(n["all_reduce"], 0);
}

// torch.distributed.pipelining in 2 stages of 32 data-parallel ranks, as
// rank 33 (stage 1's second replica; the stages captured side by side):
// Schedule1F1B, and ScheduleInterleaved1F1B with stages 1 and 3 on it. The
// schedules' batch_isend_irecv are coalesced into groups (without, 1F1B
// waited forever: each stage's send before its receive on one stream).
void expect_pipeline(const std::string& tmp, const std::string& schedule) {
  nlohmann::json graph;
  const auto rank =
      emulate_program(tmp, "examples/jobs/torch-pipelining-64.yaml", 33,
                      {"examples/torch_pipelining/train.py", "--schedule", schedule, "--steps=3"},
                      &graph, {"--capture-jobs", "2"});
  ASSERT_FALSE(rank.is_null());
  ASSERT_EQ(graph["roles"].size(), 2u);
  for (std::size_t role = 0; role < 2; ++role) {
    SCOPED_TRACE("role " + std::to_string(role));
    auto n = comm_ops_of(graph, role);
    // 4 microbatches, 3 steps: each microbatch crosses between the two
    // ranks once each way (stages 0 and 1), or three times each way when
    // interleaved (0-1, 1-2, 2-3), a send on one side and a receive on the
    // other; before its first step the schedule sends 4 bytes each way
    // across each of those boundaries; one all-reduce over dp a step.
    const int crossings = schedule == "interleaved" ? 3 : 1;
    EXPECT_EQ(n["send"], 12 * crossings + crossings);
    EXPECT_EQ(n["recv"], n["send"]);
    EXPECT_EQ(n["all_reduce"], 3);
  }
}

TEST_F(EmulateProgramTest, TorchPipeliningOneFOneBRunsAsOneRealRankOfSixtyFour) {
  expect_pipeline(tmp_, "1f1b");
}

TEST_F(EmulateProgramTest, TorchPipeliningInterleavedOneFOneBRunsAsOneRealRankOfSixtyFour) {
  expect_pipeline(tmp_, "interleaved");
}

// Objects from virtual ranks (docs/torch-backend.md, "Objects"): pipelining
// with shape inference at run time (no input_args/output_args) and a config
// broadcast from rank 0, as rank 33. Stage 1 receives its input's meta
// tensors from rank 1 and the config from rank 0, both virtual: answered
// with what rank 0's capture sent (to rank 32, and over the world); at the
// end every rank all_gather_object's its stages. The saved graph holds those
// objects, so --graph answers them too; a graph without them is one clear
// error, no hang.
TEST_F(EmulateProgramTest, TorchPipeliningInfersShapesFromObjectsOfVirtualRanks) {
  nlohmann::json graph;
  std::string output;
  const std::vector<std::string> program = {"examples/torch_pipelining/train.py", "--steps=3",
                                            "--infer-shapes", "--config-from-rank0",
                                            "--gather-stages"};
  const auto rank =
      emulate_program(tmp_, "examples/jobs/torch-pipelining-64.yaml", 33, program, &graph,
                      {"--capture-jobs", "2", "--slices", "{tmp}/slices"}, &output);
  ASSERT_FALSE(rank.is_null());
  // Rank 0's capture file holds what it sent: the config, then its output's shapes.
  const auto slice = nlohmann::json::parse(slurp(tmp_ + "/slices/slice-rank0.json"));
  ASSERT_EQ(slice["objects"].size(), 3u) << slice.dump();
  EXPECT_EQ(slice["objects"][0]["key"], "prism/object/0/all_gather/0:1:64/0");
  EXPECT_EQ(slice["objects"][1]["key"], "prism/object/0/group/0:1:64/0");
  EXPECT_EQ(slice["objects"][2]["key"], "prism/object/0/to/32/0");
  // Captured (side by side with rank 0), then emulated: rank 0's config each time.
  const std::string got =
      "[rank33]: torch_pipelining: rank 33 got rank 0's config "
      "{'lr': 0.0003, 'data_seed': 1000}";
  const std::size_t first = output.find(got);
  ASSERT_NE(first, std::string::npos) << output;
  EXPECT_NE(output.find(got, first + 1), std::string::npos) << output;
  // The stages every rank holds, gathered: 32 ranks' from rank 0's capture,
  // 32 from rank 33's own (the capture's and the emulation's), not rank
  // 33's in every slot.
  const std::string gathered =
      "[rank33]: torch_pipelining: rank 33 gathered the stages of 64 ranks: {(0,): 32, (1,): 32}";
  const std::size_t g = output.find(gathered);
  ASSERT_NE(g, std::string::npos) << output;
  EXPECT_NE(output.find(gathered, g + 1), std::string::npos) << output;
  ASSERT_EQ(graph["roles"].size(), 2u);
  // expect_pipeline's 1F1B counts, and the objects' ops: the config's two
  // broadcasts (sizes, bytes) on both stages, the meta tensors' send and
  // receive (sizes, bytes) from stage 0 to stage 1.
  const auto stage0 = comm_ops_of(graph, 0);
  const auto stage1 = comm_ops_of(graph, 1);
  EXPECT_EQ(stage0.at("broadcast"), 2);
  EXPECT_EQ(stage1.at("broadcast"), 2);
  EXPECT_EQ(stage0.at("send"), 13 + 2);
  EXPECT_EQ(stage0.at("recv"), 13);
  EXPECT_EQ(stage1.at("send"), 13);
  EXPECT_EQ(stage1.at("recv"), 13 + 2);
  EXPECT_EQ(stage1.at("all_reduce"), 3);
  EXPECT_EQ(stage0.at("all_gather"), 2);  // all_gather_object: the sizes, the pickles
  EXPECT_EQ(stage1.at("all_gather"), 2);

  // The graph keeps what the captures recorded: each role's captured rank,
  // and what those ranks sent (rank 0's three objects; rank 33, the last
  // stage, only its stages in the all_gather_object).
  EXPECT_EQ(
      graph["captured"],
      nlohmann::json::parse(R"([{"rank": 0, "role": "stage0"}, {"rank": 33, "role": "stage1"}])"));
  ASSERT_EQ(graph["objects"].size(), 4u) << graph["objects"].dump();
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(graph["objects"][i], slice["objects"][i]);
  EXPECT_EQ(graph["objects"][3]["key"], "prism/object/33/all_gather/0:1:64/0");

  // Emulated again from the graph, without capturing: the virtual ranks
  // answer from the graph's objects, rank 0's config once more; saved
  // again, the graph is the same file.
  const auto again = [&](const std::string& graph_file, const std::vector<std::string>& more) {
    std::vector<std::string> args = {"emulate",       "examples/jobs/torch-pipelining-64.yaml",
                                     "--real-ranks",  "33",
                                     "--master-port", "0",
                                     "--graph",       graph_file};
    args.insert(args.end(), more.begin(), more.end());
    for (const char* a : {"--", "env", "OMP_NUM_THREADS=1"}) args.emplace_back(a);
    args.push_back(kPython);
    args.insert(args.end(), program.begin(), program.end());
    return run_prism(args, tmp_);
  };
  const RunResult r = again("{tmp}/g.json", {"--save-graph", "{tmp}/g2.json"});
  ASSERT_EQ(r.exit_status, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr(got));
  EXPECT_THAT(r.out, HasSubstr(gathered));
  EXPECT_THAT(r.err, Not(HasSubstr("capturing")));
  EXPECT_EQ(slurp(tmp_ + "/g2.json"), slurp(tmp_ + "/g.json"));

  // `prism build --from-slices` of the same captures: the same graph file,
  // objects and all, so --graph answers them as well.
  const RunResult built = run_prism({"build", "examples/jobs/torch-pipelining-64.yaml",
                                     "--from-slices", "{tmp}/slices", "-o", "{tmp}/b.json"},
                                    tmp_);
  ASSERT_EQ(built.exit_status, 0) << built.out << built.err;
  EXPECT_EQ(slurp(tmp_ + "/b.json"), slurp(tmp_ + "/g.json"));

  // A graph without them (saved before graphs held objects): one clear
  // error, no hang.
  nlohmann::json old = nlohmann::json::parse(slurp(tmp_ + "/g.json"));
  old.erase("captured");
  old.erase("objects");
  std::ofstream(tmp_ + "/old.json") << old.dump();
  const RunResult bare = again("{tmp}/old.json", {});
  EXPECT_EQ(bare.exit_status, 1) << bare.out << bare.err;
  EXPECT_THAT(bare.err,
              HasSubstr("error: the rendezvous store: the 1st broadcast_object_list from rank 0 "
                        "over ranks 0:1:64: rank 0 is virtual and its object is not known: the "
                        "graph comes from --graph "));
  EXPECT_THAT(bare.err, HasSubstr("/old.json, which holds no objects"));
  EXPECT_THAT(bare.err, HasSubstr("RuntimeError: prism: torch.distributed.broadcast_object_list on "
                                  "rank 33 from rank 0: "));
}

// The interleaved schedule's shapes go round: rank 0 (stage 2) receives from
// rank 32 (stage 1), whose role is captured after rank 0's when the roles
// are captured one at a time. One clear error before any emulation, naming
// the ranks and the option that fixes it.
TEST_F(EmulateProgramTest, AnObjectFromARoleCapturedLaterIsOneClearError) {
  const RunResult r = run_prism(
      {"emulate", "examples/jobs/torch-pipelining-64.yaml", "--real-ranks", "33", "--master-port",
       "0", "--", "env", "OMP_NUM_THREADS=1", kPython, "examples/torch_pipelining/train.py",
       "--schedule", "interleaved", "--steps=2", "--infer-shapes"},
      tmp_);
  EXPECT_EQ(r.exit_status, 1) << r.out << r.err;
  EXPECT_THAT(r.err,
              HasSubstr("error: the capture of rank 0: the rendezvous store: the 1st "
                        "send_object_list from rank 32 to rank 0: rank 32 is virtual and sends "
                        "what rank 33, the captured rank of its role stage1, sent, but the capture "
                        "of rank 33 runs after this one, so the 1st send_object_list from rank 33 "
                        "to rank 1 is not known yet: capture the roles side by side "
                        "(--capture-jobs 2 or more)"));
  EXPECT_THAT(r.err, Not(HasSubstr("capturing role 2 of 2")));
}

// torchtitan's shape: a small Llama in pp 2 x FSDP2 over dp 4 x tensor and
// sequence parallelism over tp 8, as rank 45 (stage 1, dp 1, tp 5). Every
// dimension's traffic is in each stage's program, on its own slot: the
// sequence all-gathers and reduce-scatters on tp, FSDP2's parameter
// all-gathers and gradient reduce-scatters on dp, the stage boundary's
// sends and receives on the pipeline peer.
TEST_F(EmulateProgramTest, Llama3dRunsAsOneRealRankOfSixtyFour) {
  nlohmann::json graph;
  const auto rank =
      emulate_program(tmp_, "examples/jobs/llama-3d-64.yaml", 45,
                      {"examples/llama_3d/train.py", "--steps=3"}, &graph, {"--capture-jobs", "2"});
  ASSERT_FALSE(rank.is_null());
  ASSERT_EQ(graph["roles"].size(), 2u);
  for (std::size_t role = 0; role < 2; ++role) {
    SCOPED_TRACE("role " + std::to_string(role));
    std::map<std::string, int> n;
    for (const auto& op : graph["roles"][role]["ops"]) {
      const std::string kind = op["kind"];
      if (kind == "collective")
        ++n[op["collective"].get<std::string>() + " " + op["slot"].get<std::string>()];
      if (kind == "send" || kind == "recv") ++n[kind];
    }
    EXPECT_GT(n["all_gather tp"], 12);
    EXPECT_GT(n["reduce_scatter tp"], 12);
    // 3 steps, 2 FSDP units per stage (its block, the stage), kept
    // unsharded from forward to backward: one all-gather and one
    // reduce-scatter each per step.
    EXPECT_EQ(n["all_gather dp"], 6);
    EXPECT_EQ(n["reduce_scatter dp"], 6);
    EXPECT_EQ(n["send"], 13);  // 4 microbatches a step, one way each, and the 4-byte set-up
    EXPECT_EQ(n["recv"], 13);
  }
}

// A pipeline of 2 stages and 2 data-parallel ranks each: one rank of each
// stage is captured (the real rank for its own stage), the graph is built
// from the two, and `prism build --from-slices` and `--graph` reuse them.
TEST_F(EmulateProgramTest, APipelineIsCapturedStageByStageThenBuiltAndReused) {
  const std::vector<std::string> job = {"examples/jobs/pipeline-gpt-2.yaml", "--set",
                                        "cluster.num_gpus=4"};
  const std::vector<std::string> program = {
      "--", kPython, "examples/pipeline_gpt/train.py", "--steps", "3", "--warmup", "1"};
  const auto args = [&](std::vector<std::string> head, const std::vector<std::string>& tail) {
    head.insert(head.begin() + 1, job.begin(), job.end());
    head.insert(head.end(), tail.begin(), tail.end());
    return head;
  };
  RunResult r =
      run_prism(args({"emulate", "--real-ranks", "2", "--master-port", "0", "--slices",
                      "{tmp}/slices", "--save-graph", "{tmp}/g.json", "--report", "{tmp}/r.json"},
                     program),
                tmp_);
  ASSERT_EQ(r.exit_status, 0) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("capturing role 1 of 2 (stage0, 2 ranks): rank 0 runs"));
  EXPECT_THAT(r.err, HasSubstr("capturing role 2 of 2 (stage1, 2 ranks): rank 2 runs"));
  EXPECT_THAT(r.err, HasSubstr("pipeline-gpt-2: 4 ranks (tp 1, cp 1, dp 2, pp 2), 2 roles\n"));
  EXPECT_THAT(r.out, HasSubstr("job:                pipeline-gpt-2 (4 ranks), 1 real"));
  const auto report = nlohmann::json::parse(slurp(tmp_ + "/r.json"));
  const auto& rank = report["real_ranks"][0];
  EXPECT_EQ(rank["rank"], 2);
  EXPECT_EQ(rank["iterations"], 2);
  // Per microbatch a receive and a send each way, then the gradients'
  // all-reduce over the stage's data-parallel group: the graph's ops.
  EXPECT_GT(rank["ops"].get<int>(), 8);
  EXPECT_EQ(rank["ops"], rank["graph_ops"]);
  EXPECT_EQ(rank["bytes"], rank["graph_bytes"]);
  EXPECT_TRUE(fs::exists(tmp_ + "/slices/slice-rank0.json"));
  EXPECT_TRUE(fs::exists(tmp_ + "/slices/slice-rank2.json"));

  // The same captures build the same graph, byte for byte, with what
  // --save-graph keeps after it: each role's captured rank and what those
  // ranks sent (this program sends no objects).
  r = run_prism(args({"build", "--from-slices", "{tmp}/slices", "-o", "{tmp}/b.json"}, {}), tmp_);
  ASSERT_EQ(r.exit_status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("  stage1          2      2  captured rank 2; the same program as "
                               "captured rank 3\n"));
  const std::string saved = slurp(tmp_ + "/g.json");
  const std::size_t captured = saved.find(",\n  \"captured\": [\n");
  ASSERT_NE(captured, std::string::npos) << saved;
  EXPECT_EQ(saved.substr(captured),
            ",\n  \"captured\": [\n    {\"rank\": 0, \"role\": \"stage0\"},\n    {\"rank\": 2, "
            "\"role\": \"stage1\"}\n  ],\n  \"objects\": []\n}\n");
  EXPECT_EQ(slurp(tmp_ + "/b.json"), saved);

  // --graph: no capture, the program runs against the graph it was given.
  r = run_prism(
      args({"emulate", "--real-ranks", "0", "--master-port", "0", "--graph", "{tmp}/b.json"},
           program),
      tmp_);
  ASSERT_EQ(r.exit_status, 0) << r.out << r.err;
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("capturing")));
  EXPECT_THAT(r.out, HasSubstr("iteration time:     "));

  // A stage without a capture, and a graph of another world, are refused.
  fs::create_directories(tmp_ + "/half");
  fs::copy_file(tmp_ + "/slices/slice-rank0.json", tmp_ + "/half/slice-rank0.json");
  r = run_prism(args({"build", "--from-slices", "{tmp}/half", "-o", "{tmp}/h.json"}, {}), tmp_);
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_THAT(r.err, HasSubstr("error: --from-slices: job 'pipeline-gpt-2': role 'stage1' (2 "
                               "ranks from rank 2) has no captured rank, and the job has no model "
                               "section to fall back on: capture one of its ranks"));
  EXPECT_FALSE(fs::exists(tmp_ + "/h.json"));
  r = run_prism({"emulate", "examples/jobs/pipeline-gpt-2.yaml", "--real-ranks", "0", "--graph",
                 "{tmp}/b.json", "--", kPython, "examples/pipeline_gpt/train.py"},
                tmp_);
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_THAT(r.err, HasSubstr("a graph of 4 ranks; job 'pipeline-gpt-2' has 2"));
}

// --capture-jobs 2: the two stages are captured at once, each pinned to its
// own core where there are two, and the graph built from them is emulated.
TEST_F(EmulateProgramTest, StagesAreCapturedSideBySide) {
  const RunResult r = run_prism(
      {"emulate",
       "examples/jobs/pipeline-gpt-2.yaml",
       "--real-ranks",
       "1",
       "--master-port",
       "0",
       "--capture-jobs",
       "2",
       "--slices",
       "{tmp}/slices",
       "--report",
       "{tmp}/r.json",
       "--",
       "sh",
       "-c",
       "taskset -c \"$RANK\" true 2>/dev/null && exec taskset -c \"$RANK\" \"$0\" \"$@\"; "
       "exec \"$0\" \"$@\"",
       kPython,
       "examples/pipeline_gpt/train.py",
       "--steps",
       "3",
       "--warmup",
       "1"},
      tmp_);
  ASSERT_EQ(r.exit_status, 0) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("capturing role 1 of 2 (stage0, 1 ranks): rank 0 runs"));
  EXPECT_THAT(r.err, HasSubstr("capturing role 2 of 2 (stage1, 1 ranks): rank 1 runs"));
  EXPECT_THAT(r.err, HasSubstr("captured rank 0: "));
  EXPECT_THAT(r.err, HasSubstr("captured rank 1: "));
  EXPECT_TRUE(fs::exists(tmp_ + "/slices/slice-rank0.json"));
  EXPECT_TRUE(fs::exists(tmp_ + "/slices/slice-rank1.json"));
  const auto report = nlohmann::json::parse(slurp(tmp_ + "/r.json"));
  const auto& rank = report["real_ranks"][0];
  EXPECT_EQ(rank["rank"], 1);
  EXPECT_EQ(rank["ops"], rank["graph_ops"]);
  EXPECT_EQ(rank["bytes"], rank["graph_bytes"]);
}

// Needs no torch: a program's job has no graph for the other commands.
TEST(ProgramJobTest, SimulateRefusesAJobWithoutModelAndSaysWhatToRun) {
  std::string templ = (fs::temp_directory_path() / "prism_program_job.XXXXXX").string();
  ASSERT_NE(::mkdtemp(templ.data()), nullptr);
  const RunResult r = run_prism({"simulate", "examples/jobs/ddp-gpt-64.yaml"}, templ);
  fs::remove_all(templ);
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_THAT(r.err, HasSubstr("job 'ddp-gpt-64' has no model section: it describes a program, "
                               "whose graph comes from running it (prism emulate"));
}

}  // namespace
}  // namespace prism
