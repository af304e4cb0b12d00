// The coordinator against scripted live ranks: the test speaks the wire
// protocol itself with explicit virtual times, so every expected completion
// is exact. The coordinator runs on a thread of its own and listens in
// process (wire/in_process.h), but where a test writes to its socket by hand.
#include "runtime/coordinator.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <future>
#include <limits>
#include <thread>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "../replay/test_graphs.h"
#include "wire/connection.h"

namespace prism::runtime {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;
using namespace wire;

// Four ranks compute 100 * (rank + 1) ns, then all-reduce 1000 B, compute
// 50 ns and all-reduce again. Replayed: 400 + 1500, + 50 + 1500 = 3450 ns.
ExecutionGraph four_ranks() {
  std::vector<Role> roles;
  for (int r = 0; r < 4; ++r) {
    RoleBuilder b("r" + std::to_string(r), {"s"});
    b.compute(0, SimTime{100 * (r + 1)});
    b.collective(0, 0, CollectiveKind::kAllReduce, Bytes{1000});
    b.compute(0, SimTime{50});
    b.collective(0, 0, CollectiveKind::kAllReduce, Bytes{1000});
    roles.push_back(std::move(b).build());
  }
  return testing::make_graph({{"dp", 4}}, 8, {testing::group_slot("dp", {0})}, std::move(roles),
                             {0, 1, 2, 3});
}

// Where a test's coordinator listens: in process (wire/in_process.h), or on
// a Unix socket for a test that writes to it by hand.
Address where(Address::Kind kind) {
  static int n = 0;
  const std::string name = "c" + std::to_string(n++);
  if (kind == Address::Kind::kInProcess) return Address{kind, "coordinator-test-" + name, "", 0};
  if (kind == Address::Kind::kTcp) return Address{kind, "", "127.0.0.1", 0};  // any free port
  const auto dir =
      std::filesystem::temp_directory_path() / ("prism-coord-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return Address{kind, (dir / (name + ".sock")).string(), "", 0};
}

// A coordinator on its own thread; result() joins it.
class Running {
 public:
  Running(const ExecutionGraph& g, std::vector<Rank> live, bool capture = false,
          std::chrono::milliseconds timeout = 5000ms,
          Address::Kind kind = Address::Kind::kInProcess, std::string secret = "",
          std::shared_ptr<CommIds> comm_ids = nullptr)
      : network_(testing::unit_network()), memory_(DeviceMemoryOptions{}) {
    CoordinatorOptions o;
    o.secret = std::move(secret);
    o.comm_ids = std::move(comm_ids);
    o.live_ranks = std::move(live);
    o.job = "four";
    o.timeout = timeout;
    o.capture = capture;
    coord_ = std::make_unique<Coordinator>(g, ReplayModels{&network_, &compute_, &memory_}, o);
    Result<Address> a = coord_->listen(where(kind));
    EXPECT_TRUE(a.is_ok()) << a.status().message();
    address = a.value();
    future_ =
        std::async(std::launch::async, [this] { return coord_->run([] { return Status::ok(); }); });
  }
  Result<CoordinatorResult> result() {
    EXPECT_EQ(future_.wait_for(10s), std::future_status::ready) << "the coordinator hangs";
    return future_.get();
  }
  Address address;

 private:
  AlphaBetaModel network_;
  RooflineModel compute_;
  AllocatorMemoryModel memory_;
  std::unique_ptr<Coordinator> coord_;
  std::future<Result<CoordinatorResult>> future_;
};

// A scripted live rank.
class Rank0 {
 public:
  Rank0(const Address& a, Rank rank = 0, std::string secret = "") : rank_(rank) {
    Result<std::unique_ptr<Connection>> c = Connection::open(a, 2000ms);
    EXPECT_TRUE(c.is_ok()) << c.status().message();
    conn = std::move(c).value();
    send(Hello{rank, 4, rank, ::getpid(), "coordinator_test", std::move(secret)});
    EXPECT_EQ(std::get<Welcome>(receive()).job, "four");
    send(CommInit{0, 4, rank, 0, {0, 1, 2, 3}});
  }
  void send(const Message& m) { ASSERT_TRUE(conn->send(m).is_ok()); }
  Message receive() {
    Result<Message> m = conn->receive(3000ms);
    EXPECT_TRUE(m.is_ok()) << m.status().message();
    return m.is_ok() ? m.value() : Message{Error{}};
  }
  void all_reduce(std::uint32_t id, std::int64_t at, std::int64_t bytes = 1000) {
    send(wire::Op{id, 0, 0, OpCode::kAllReduce, DType::kBFloat16, bytes, 0, 0, 0, at});
  }
  // The graph's two all-reduces, each waited for, then the goodbye.
  void run_the_graph() {
    all_reduce(0, 100);
    finish(wait(0, 100));
  }
  // The graph's second all-reduce, 50 ns after the first completed at
  // `first`, waited for, then the goodbye; returns its completion.
  std::int64_t finish(std::int64_t first) {
    all_reduce(1, first + 50);
    const std::int64_t second = wait(1, first + 50);
    send(Bye{0, second});
    return second;
  }
  // Waits for op `id` and returns its completion.
  std::int64_t wait(std::uint32_t id, std::int64_t at) {
    send(Wait{wait_id_++, id, seen_, at, kNoLimit});
    const Message m = receive();
    const auto* done = std::get_if<Complete>(&m);
    EXPECT_TRUE(done != nullptr) << to_string(type_of(m));
    if (done == nullptr) return -1;
    ++seen_;
    EXPECT_EQ(done->op_id, id);
    return done->at;
  }
  std::unique_ptr<Connection> conn;
  std::uint32_t wait_id_ = 0, seen_ = 0;

 private:
  Rank rank_;
};

TEST(CoordinatorTest, LiveRankOnTheReplayedScheduleGetsTheReplayedTimes) {
  const ExecutionGraph g = four_ranks();
  Running c(g, {0}, /*capture=*/true);
  Rank0 r(c.address);
  r.all_reduce(0, 100);
  const std::int64_t first = r.wait(0, 100);
  EXPECT_EQ(first, 1900);  // rank 3 arrives at 400; 1500 ns of all-reduce
  r.all_reduce(1, first + 50);
  const std::int64_t second = r.wait(1, first + 50);
  EXPECT_EQ(second, 3450);
  r.send(Bye{0, second});
  Result<CoordinatorResult> out = c.result();
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  EXPECT_EQ(out.value().replay.makespan.ns, 3450);
  ASSERT_EQ(out.value().live.size(), 1u);
  const LiveRankReport& live = out.value().live[0];
  EXPECT_EQ(live.iteration_time.ns, 3450);
  EXPECT_EQ(live.iteration_times, std::vector<SimTime>{SimTime{3450}});  // no markers: one
  EXPECT_EQ(live.compute.ns, 150);                                       // not held in waits
  EXPECT_EQ(live.wait.ns, 3300);
  EXPECT_EQ(live.ops, 2);
  ASSERT_EQ(out.value().captures.size(), 1u);
  const std::string json = format_capture_json(out.value().captures[0]);
  EXPECT_THAT(json, HasSubstr(R"("code":"all_reduce")"));
  EXPECT_THAT(json, HasSubstr(R"("graph_op":1)"));
  EXPECT_THAT(json, HasSubstr(R"({"at":1900,"op_id":0,"type":"complete"})"));
}

// A communicator the NCCL drop-in declares by size, position and id hash,
// with no collective of its own in the graph (a pipeline group that only
// sends and receives): placed by the members the store learnt of its id.
// Without them there is nothing of its size to place it on.
TEST(CoordinatorTest, CommunicatorsDeclaredByIdTakeTheirMembersFromTheStore) {
  const ExecutionGraph g = four_ranks();
  auto ids = std::make_shared<CommIds>();
  ids->record(0xabc, {0, 2});
  {
    Running c(g, {0}, false, 5000ms, Address::Kind::kInProcess, "", ids);
    Rank0 r(c.address);
    r.send(CommInit{1, 2, 0, 0xabc, {}});
    r.send(CommInit{2, 1, 0, 0x123, {}});  // one rank: itself
    r.run_the_graph();
    Result<CoordinatorResult> out = c.result();
    ASSERT_TRUE(out.is_ok()) << out.status().message();
  }
  Running c(g, {0});
  Rank0 r(c.address);
  r.send(CommInit{1, 2, 0, 0xabc, {}});
  Result<CoordinatorResult> out = c.result();
  ASSERT_FALSE(out.is_ok());
  EXPECT_THAT(out.status().message(),
              HasSubstr("no communicator of the graph left with that size and position"));
}

TEST(CoordinatorTest, WaitWithADeadlineGetsAHorizon) {
  const ExecutionGraph g = four_ranks();
  Running c(g, {0});
  Rank0 r(c.address);
  r.all_reduce(0, 100);
  // Nothing of rank 0 completes before 150: the coordinator says so.
  r.send(Wait{0, kAnyOp, 0, 120, 150});
  const Message m = r.receive();
  ASSERT_TRUE(std::holds_alternative<Horizon>(m)) << to_string(type_of(m));
  EXPECT_EQ(std::get<Horizon>(m).wait_id, 0u);
  EXPECT_EQ(std::get<Horizon>(m).at, 150);
  r.wait_id_ = 1;
  EXPECT_EQ(r.wait(0, 150), 1900);
  EXPECT_EQ(r.finish(1900), 3450);
  ASSERT_TRUE(c.result().is_ok());
}

// A progress thread's poll (a wait until its own `at`) learns when the
// simulation can next change: the virtual ranks' compute ends at 200, 300
// and 400, then the all-reduce ends at 1900; nothing of rank 0 completes
// before each.
TEST(CoordinatorTest, APollLearnsWhenNothingCanCompleteBefore) {
  const ExecutionGraph g = four_ranks();
  Running c(g, {0});
  Rank0 r(c.address);
  r.all_reduce(0, 100);
  const auto poll = [&](std::int64_t at) {
    r.send(Wait{r.wait_id_++, kAnyOp, 0, at, at});
    const Message m = r.receive();
    EXPECT_TRUE(std::holds_alternative<Horizon>(m)) << to_string(type_of(m));
    const auto* h = std::get_if<Horizon>(&m);
    EXPECT_TRUE(h != nullptr && h->at == at);
    return h != nullptr ? h->quiet_until : -1;
  };
  EXPECT_EQ(poll(120), 200);
  EXPECT_EQ(poll(200), 200);  // events at the bound itself wait for it to pass
  EXPECT_EQ(poll(250), 300);
  EXPECT_EQ(poll(450), 1900);
  // Polling before the quiet time is allowed, only useless.
  EXPECT_EQ(poll(1000), 1900);
  EXPECT_EQ(r.wait(0, 1000), 1900);
  EXPECT_EQ(r.finish(1900), 3450);
  ASSERT_TRUE(c.result().is_ok());
}

// With two live ranks, another's bound limits the quiet time: it may yet
// send something that matters earlier.
TEST(CoordinatorTest, AnotherLiveRanksBoundLimitsTheQuietTime) {
  const ExecutionGraph g = four_ranks();
  Running c(g, {0, 1});
  Rank0 r0(c.address);
  Rank0 r1(c.address, 1);
  r0.all_reduce(0, 100);
  r1.all_reduce(0, 150);
  r1.send(Wait{0, kAnyOp, 0, 150, 150});  // rank 1's bound: 150
  r0.send(Wait{0, kAnyOp, 0, 120, 120});
  const Message m = r0.receive();
  ASSERT_TRUE(std::holds_alternative<Horizon>(m)) << to_string(type_of(m));
  EXPECT_EQ(std::get<Horizon>(m).quiet_until, 150);  // not rank 2's compute end, 300
  r0.conn.reset();
  r1.conn.reset();
  EXPECT_FALSE(c.result().is_ok());
}

TEST(CoordinatorTest, LateLiveRankDelaysEveryone) {
  const ExecutionGraph g = four_ranks();
  Running c(g, {2});
  Rank0 r(c.address, 2);
  r.all_reduce(0, 5000);
  EXPECT_EQ(r.wait(0, 5000), 6500);
  r.all_reduce(1, 6550);
  EXPECT_EQ(r.wait(1, 6550), 8050);
  r.send(Bye{0, 8050});
  Result<CoordinatorResult> out = c.result();
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  EXPECT_EQ(out.value().replay.makespan.ns, 8050);
}

TEST(CoordinatorTest, TwoLiveRanksInOneCollective) {
  const ExecutionGraph g = four_ranks();
  Running c(g, {1, 3});
  auto play = [&](Rank rank, std::int64_t late) {
    Rank0 r(c.address, rank);
    r.all_reduce(0, 100 * (rank + 1) + late);
    const std::int64_t first = r.wait(0, 100 * (rank + 1) + late);
    r.all_reduce(1, first + 50);
    const std::int64_t second = r.wait(1, first + 50);
    r.send(Bye{0, second});
    return std::make_pair(first, second);
  };
  auto one = std::async(std::launch::async, play, 1, 0);
  auto three = std::async(std::launch::async, play, 3, 1000);
  const auto a = one.get(), b = three.get();
  EXPECT_EQ(a.first, 1400 + 1500);  // rank 3 arrives at 1400
  EXPECT_EQ(b.first, a.first);
  EXPECT_EQ(b.second, a.second);
  EXPECT_EQ(a.second, a.first + 50 + 1500);
  ASSERT_TRUE(c.result().is_ok());
}

// 2 x 2 grid: every rank all-reduces 1000 B on the world, then on its tp
// pair ({0, 1} or {2, 3}).
ExecutionGraph world_then_pairs() {
  RoleBuilder b("r", {"s"});
  b.collective(0, 0, CollectiveKind::kAllReduce, Bytes{1000});
  b.collective(0, 1, CollectiveKind::kAllReduce, Bytes{1000});
  return testing::make_graph({{"tp", 2}, {"dp", 2}}, 8,
                             {testing::group_slot("world", {0, 1}), testing::group_slot("tp", {0})},
                             {std::move(b).build()}, {0, 0, 0, 0});
}

TEST(CoordinatorTest, LiveRanksSplitIntoTheGraphsGroups) {
  const ExecutionGraph g = world_then_pairs();
  Running c(g, {0, 1});
  auto play = [&](Rank rank) {
    Rank0 r(c.address, rank);  // communicator 0: the world
    r.send(CommSplit{0, 1, 5, rank});
    const auto info = std::get<CommInfo>(r.receive());
    EXPECT_EQ(info.members, (std::vector<std::int32_t>{0, 1}));
    EXPECT_EQ(info.rank_in_comm, rank);
    r.all_reduce(0, 10);
    const std::int64_t first = r.wait(0, 10);
    r.send(wire::Op{1, 1, 0, OpCode::kAllReduce, DType::kBFloat16, 1000, 0, 0, 0, first});
    r.send(Bye{0, r.wait(1, first)});
  };
  auto zero = std::async(std::launch::async, play, 0);
  auto one = std::async(std::launch::async, play, 1);
  zero.get(), one.get();
  const Result<CoordinatorResult> out = c.result();
  ASSERT_TRUE(out.is_ok()) << out.status().message();
}

TEST(CoordinatorTest, LiveRanksWhoseColorsDisagreeWithTheGraphAreRejected) {
  const ExecutionGraph g = world_then_pairs();
  Running c(g, {0, 1});
  Rank0 zero(c.address, 0);
  zero.send(CommSplit{0, 1, 5, 0});
  EXPECT_TRUE(std::holds_alternative<CommInfo>(zero.receive()));
  Rank0 one(c.address, 1);
  one.send(CommSplit{0, 1, 6, 1});
  EXPECT_EQ(std::get<Error>(one.receive()).code, ErrorCode::kRejected);
  const Result<CoordinatorResult> out = c.result();
  ASSERT_FALSE(out.is_ok());
  EXPECT_THAT(out.status().message(),
              HasSubstr("rank 1 split #0 of a communicator of 4 ranks with color 6 is given [0,1] "
                        "by the graph, but live rank 0 passed color 5 and was given [0,1]"));
}

TEST(CoordinatorTest, OpTheGraphDoesNotHaveIsAMismatch) {
  const ExecutionGraph g = four_ranks();
  Running c(g, {0});
  Rank0 r(c.address);
  r.all_reduce(0, 100, 4096);
  const Message m = r.receive();
  ASSERT_TRUE(std::holds_alternative<Error>(m));
  EXPECT_EQ(std::get<Error>(m).code, ErrorCode::kMismatch);
  const Result<CoordinatorResult> out = c.result();
  ASSERT_FALSE(out.is_ok());
  EXPECT_THAT(out.status().message(),
              HasSubstr("rank 0 op 0 (all_reduce of 4096 bytes on communicator 0): the graph has "
                        "all_reduce of 1000 bytes of bf16 here: all_reduce #0 on 'dp' (op 1)"));
}

TEST(CoordinatorTest, ClockGoingBackIsRejected) {
  const ExecutionGraph g = four_ranks();
  Running c(g, {0});
  Rank0 r(c.address);
  r.all_reduce(0, 100);
  r.all_reduce(1, 50);
  const Result<CoordinatorResult> out = c.result();
  ASSERT_FALSE(out.is_ok());
  EXPECT_THAT(out.status().message(), HasSubstr("sent op 1 at 50 ns, before 100 ns"));
}

// A compute report whose end is past INT64_MAX ns was summed with a
// signed overflow (UBSan, issue 26); now it is refused by name.
TEST(CoordinatorTest, AComputeReportEndingPastTheLargestTimeIsRefused) {
  const ExecutionGraph g = four_ranks();
  Running c(g, {0});
  Rank0 r(c.address);
  const std::int64_t max = std::numeric_limits<std::int64_t>::max();
  r.send(Compute{0, max - 10, 100, "gemm"});
  const Result<CoordinatorResult> out = c.result();
  ASSERT_FALSE(out.is_ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(),
              HasSubstr(fmt::format("live rank 0 sent a compute report at {} ns lasting 100 ns: "
                                    "it ends past the largest time ({} ns)",
                                    max - 10, max)));
}

// Memory held past INT64_MAX bytes stops there instead of wrapping negative.
TEST(CoordinatorTest, MemoryHeldPastTheLargestCountSaturates) {
  const ExecutionGraph g = four_ranks();
  Running c(g, {0});
  Rank0 r(c.address);
  const std::int64_t max = std::numeric_limits<std::int64_t>::max();
  r.send(wire::Memory{MemoryAction::kAlloc, 1, max - 1, 0, 10});
  r.send(wire::Memory{MemoryAction::kAlloc, 1, 5, 0, 20});  // the same block grows
  r.send(wire::Memory{MemoryAction::kAlloc, 2, max, 0, 30});
  r.send(wire::Memory{MemoryAction::kFree, 1, 0, 0, 40});
  r.send(wire::Memory{MemoryAction::kFree, 2, 0, 0, 50});
  r.run_the_graph();
  Result<CoordinatorResult> out = c.result();
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  ASSERT_EQ(out.value().live.size(), 1u);
  EXPECT_EQ(out.value().live[0].peak_allocated.count, max);
}

TEST(CoordinatorTest, RankThatHangsUpIsReportedWithItsLastOp) {
  const ExecutionGraph g = four_ranks();
  Running c(g, {0});
  {
    Rank0 r(c.address);
    r.all_reduce(0, 100);
  }  // the connection closes without a bye, as when the process is killed
  const Result<CoordinatorResult> out = c.result();
  ASSERT_FALSE(out.is_ok());
  EXPECT_EQ(out.status().code(), StatusCode::kUnavailable);  // a lost peer
  EXPECT_THAT(out.status().message(), HasSubstr("live rank 0 (pid "));
  EXPECT_THAT(out.status().message(), HasSubstr("connection closed without a bye"));
  EXPECT_THAT(out.status().message(),
              HasSubstr("its last op: all_reduce #0 on 'dp' (op 1), entered at 0.000100 ms"));
}

TEST(CoordinatorTest, RankThatNeverConnectsTimesOut) {
  const ExecutionGraph g = four_ranks();
  Running c(g, {0, 2}, false, 300ms);
  Rank0 r(c.address);  // rank 2 never comes
  const Result<CoordinatorResult> out = c.result();
  ASSERT_FALSE(out.is_ok());
  EXPECT_EQ(out.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(out.status().message(), "live rank 2 did not connect within 0.3 s");
  const Message m = r.receive();  // rank 0 is told
  ASSERT_TRUE(std::holds_alternative<Error>(m));
  EXPECT_EQ(std::get<Error>(m).code, ErrorCode::kAborted);
}

TEST(CoordinatorTest, GarbageEndsTheEmulation) {
  const ExecutionGraph g = four_ranks();
  Running c(g, {0}, false, 5000ms, Address::Kind::kUnix);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", c.address.path.c_str());
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  const std::string junk = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::write(fd, junk.data(), junk.size()), static_cast<ssize_t>(junk.size()));
  const Result<CoordinatorResult> out = c.result();
  ::close(fd);
  ASSERT_FALSE(out.is_ok());
  EXPECT_THAT(out.status().message(), HasSubstr("a peer that never said hello"));
  EXPECT_THAT(out.status().message(), HasSubstr("bad magic"));
}

// On TCP anyone who reaches the port can connect: garbage from a peer that
// never said hello is dropped, and the real rank runs to the end.
TEST(CoordinatorTest, GarbageOnTcpIsDroppedAndTheRunGoesOn) {
  const ExecutionGraph g = four_ranks();
  Running c(g, {0}, false, 5000ms, Address::Kind::kTcp);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(c.address.port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  const std::string junk = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::write(fd, junk.data(), junk.size()), static_cast<ssize_t>(junk.size()));
  Rank0 r(c.address);
  r.all_reduce(0, 100);
  EXPECT_EQ(r.wait(0, 100), 1900);
  r.all_reduce(1, 1950);
  EXPECT_EQ(r.wait(1, 1950), 3450);
  r.send(Bye{0, 3450});
  const Result<CoordinatorResult> out = c.result();
  ::close(fd);
  ASSERT_TRUE(out.is_ok()) << out.status().message();
}

TEST(CoordinatorTest, SilentRankTimesOut) {
  const ExecutionGraph g = four_ranks();
  Running c(g, {0}, false, 300ms);
  Rank0 r(c.address);
  r.all_reduce(0, 100);  // and then nothing: the emulation waits for rank 0
  const Result<CoordinatorResult> out = c.result();
  ASSERT_FALSE(out.is_ok());
  EXPECT_EQ(out.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(out.status().message(),
              HasSubstr("live rank 0 (pid " + std::to_string(::getpid()) +
                        ") sent nothing for 0.3 s while the emulation waited for it"));
}

TEST(CoordinatorTest, GoodbyeBeforeTheGraphEndsIsADeadlock) {
  const ExecutionGraph g = four_ranks();
  Running c(g, {0});
  Rank0 r(c.address);
  r.all_reduce(0, 100);
  EXPECT_EQ(r.wait(0, 100), 1900);
  r.send(Bye{0, 2000});  // without its second all-reduce
  const Result<CoordinatorResult> out = c.result();
  ASSERT_FALSE(out.is_ok());
  EXPECT_THAT(out.status().message(),
              HasSubstr("live rank 0 said goodbye with 1 communication ops of the graph not "
                        "entered; rank 1 waits for collective all_reduce #1 on "
                        "'dp': rank 0 not arrived"));
}

// Anyone who can reach the socket can say hello: only the run's secret makes
// a rank. A stranger without it is refused before its rank is believed, and
// the real rank 0, coming after, runs as if nothing happened.
TEST(CoordinatorTest, AHelloWithoutTheRunsSecretIsRefusedAndTheRunGoesOn) {
  const ExecutionGraph g = four_ranks();
  Running c(g, {0}, false, 5000ms, Address::Kind::kInProcess, "6b1f0c2e");
  for (const std::string& wrong : {std::string(), std::string("6b1f0c2f")}) {
    Result<std::unique_ptr<Connection>> stranger = Connection::open(c.address, 2000ms);
    ASSERT_TRUE(stranger.is_ok());
    ASSERT_TRUE(stranger.value()->send(Hello{0, 4, 0, 1, "stranger", wrong}).is_ok());
    Result<Message> m = stranger.value()->receive(2000ms);
    ASSERT_TRUE(m.is_ok());
    ASSERT_TRUE(std::holds_alternative<Error>(m.value()));
    EXPECT_EQ(std::get<Error>(m.value()).code, ErrorCode::kRejected);
    EXPECT_THAT(std::get<Error>(m.value()).message, HasSubstr("does not carry this run's secret"));
  }
  Rank0 r(c.address, 0, "6b1f0c2e");
  r.all_reduce(0, 100);
  EXPECT_EQ(r.wait(0, 100), 1900);
  r.all_reduce(1, 1950);
  EXPECT_EQ(r.wait(1, 1950), 3450);
  r.send(Bye{0, 3450});
  Result<CoordinatorResult> out = c.result();
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  EXPECT_EQ(out.value().replay.makespan.ns, 3450);
}

TEST(CoordinatorTest, WrongRankIsRefused) {
  const ExecutionGraph g = four_ranks();
  Running c(g, {0}, false, 300ms);
  Result<std::unique_ptr<Connection>> conn = Connection::open(c.address, 2000ms);
  ASSERT_TRUE(conn.is_ok());
  ASSERT_TRUE(conn.value()->send(Hello{1, 4, 1, 1, "x"}).is_ok());
  Result<Message> m = conn.value()->receive(2000ms);
  ASSERT_TRUE(m.is_ok());
  ASSERT_TRUE(std::holds_alternative<Error>(m.value()));
  EXPECT_EQ(std::get<Error>(m.value()).message, "rank 1 is not a live rank of this emulation");
  EXPECT_FALSE(c.result().is_ok());  // rank 0 never came
}

}  // namespace
}  // namespace prism::runtime
