// The c10d backend against PrismLLM's real coordinator: a Python program as
// live rank 0 of a 4-rank graph, matched op by op (communicator members,
// bytes, element type) and answered at the replayed completions.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <future>
#include <iostream>

#include "../../replay/test_graphs.h"
#include "python_rank.h"
#include "runtime/coordinator.h"

namespace prism::torch_shim::testing {
namespace {

using namespace std::chrono_literals;

// Every rank computes 30 ms, all-reduces 4000 B of fp32 on the world, twice.
// Rank 0 is live: its compute is its own.
ExecutionGraph four_ranks() {
  // One stream, so that each all-reduce follows its compute.
  RoleBuilder b("dp", {"main"});
  for (int i = 0; i < 2; ++i) {
    b.compute(0, SimTime{30'000'000});
    b.collective(0, 0, CollectiveKind::kAllReduce, Bytes{4000}, DType::kFloat32);
  }
  std::vector<Role> roles;
  roles.push_back(std::move(b).build());
  return prism::testing::make_graph({{"dp", 4}}, 8, {prism::testing::group_slot("dp", {0})},
                                    std::move(roles), {0, 0, 0, 0});
}

std::int64_t value_after(const std::string& output, const std::string& key) {
  const std::size_t at = output.find(key + " ");
  return at == std::string::npos ? -1 : std::stoll(output.substr(at + key.size() + 1));
}

TEST(TorchCoordinatorTest, PythonRankGetsTheReplayedCompletions) {
  if (const std::string why = torch_missing(); !why.empty()) GTEST_SKIP() << why;
  const ExecutionGraph g = four_ranks();
  AlphaBetaModel network(prism::testing::unit_network());
  RooflineModel compute;
  AllocatorMemoryModel memory(DeviceMemoryOptions{});
  runtime::CoordinatorOptions o;
  o.live_ranks = {0};
  o.job = "four";
  o.timeout = 60s;
  runtime::Coordinator coordinator(g, ReplayModels{&network, &compute, &memory}, o);
  const auto dir = std::filesystem::temp_directory_path() /
                   ("prism-torch-coord-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  Result<wire::Address> a = coordinator.listen(
      wire::Address{wire::Address::Kind::kUnix, (dir / "c.sock").string(), "", 0});
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  auto replayed =
      std::async(std::launch::async, [&] { return coordinator.run([] { return Status::ok(); }); });

  StoreServer store(4);
  ASSERT_NE(store.port(), 0);
  const RunResult r =
      run_script("coordinated.py", rank_env(a.value().to_string(), store.port(), "30000"));
  ASSERT_EQ(replayed.wait_for(30s), std::future_status::ready) << "the coordinator hangs";
  Result<runtime::CoordinatorResult> out = replayed.get();
  std::filesystem::remove_all(dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::cerr << r.output;  // the virtual times seen, for people
  ASSERT_TRUE(out.is_ok()) << out.status().message() << "\n" << r.output;

  // The peers arrive at 30 ms; 4000 B take 6 µs on the unit network. The
  // future is seen within a poll or so (a loaded machine: a few ms).
  const std::int64_t first = value_after(r.output, "FIRST_NS");
  const std::int64_t second = value_after(r.output, "SECOND_NS");
  EXPECT_GE(first, 30'006'000) << r.output;
  EXPECT_LT(first, 30'006'000 + 20'000'000) << r.output;
  // Work.wait jumps to the completion: 30 ms after the peers' first one.
  EXPECT_GE(second, 60'012'000) << r.output;
  EXPECT_LT(second, 60'012'000 + 20'000'000) << r.output;
  ASSERT_EQ(out.value().live.size(), 1u);
  const runtime::LiveRankReport& live = out.value().live[0];
  EXPECT_EQ(live.ops, 2);
  EXPECT_EQ(live.exit_code, 0);
  EXPECT_GE(live.finish.ns, second);
}

}  // namespace
}  // namespace prism::torch_shim::testing
