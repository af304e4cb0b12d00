// ProgramCapture against a scripted rank: every op completes when entered,
// everything the rank sent is recorded in order, and each way a capture can
// go wrong ends it with a message naming the rank.
#include "runtime/program_capture.h"

#include <unistd.h>

#include <filesystem>
#include <future>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/split_color.h"
#include "wire/connection.h"

namespace prism::runtime {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;
using namespace wire;

std::string socket_path() {
  static int n = 0;
  const auto dir =
      std::filesystem::temp_directory_path() / ("prism-capture-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / fmt::format("c{}.sock", n++)).string();
}

class Running {
 public:
  explicit Running(std::chrono::milliseconds timeout = 5000ms, Rank rank = 2, int world = 8,
                   std::vector<std::vector<std::int32_t>> grid_groups = {},
                   std::shared_ptr<CommIds> comm_ids = nullptr)
      : capture_(ProgramCaptureOptions{rank, world, "dp8", timeout, std::move(grid_groups), "",
                                       std::move(comm_ids)}) {
    Result<Address> a = capture_.listen(Address{Address::Kind::kUnix, socket_path(), "", 0});
    EXPECT_TRUE(a.is_ok()) << a.status().message();
    address = a.value();
    future_ = std::async(std::launch::async,
                         [this] { return capture_.run([] { return Status::ok(); }); });
  }
  Result<RankCapture> result() {
    EXPECT_EQ(future_.wait_for(10s), std::future_status::ready) << "the capture hangs";
    return future_.get();
  }
  Address address;

 private:
  ProgramCapture capture_;
  std::future<Result<RankCapture>> future_;
};

std::unique_ptr<Connection> open_rank(const Address& a, Rank rank = 2, int world = 8) {
  Result<std::unique_ptr<Connection>> c = Connection::open(a, 2000ms);
  EXPECT_TRUE(c.is_ok()) << c.status().message();
  if (!c.is_ok()) return nullptr;
  EXPECT_TRUE(c.value()->send(Hello{rank, world, rank, ::getpid(), "capture_test"}).is_ok());
  return std::move(c).value();
}

Message receive(Connection& c) {
  Result<Message> m = c.receive(3000ms);
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  return m.is_ok() ? m.value() : Message{Error{}};
}

wire::Op all_reduce(std::uint32_t id, std::int64_t at) {
  return wire::Op{id, 0, 1, OpCode::kAllReduce, DType::kFloat32, 4096, 0, 0, 0, at};
}

TEST(ProgramCaptureTest, EveryOpCompletesWhenEnteredAndEverythingIsRecorded) {
  Running c;
  std::unique_ptr<Connection> r = open_rank(c.address);
  ASSERT_TRUE(r);
  EXPECT_EQ(std::get<Welcome>(receive(*r)).job, "dp8");
  ASSERT_TRUE(r->send(CommInit{0, 8, 2, 0, {0, 1, 2, 3, 4, 5, 6, 7}}).is_ok());
  ASSERT_TRUE(r->send(all_reduce(0, 1000)).is_ok());
  const auto done = std::get<Complete>(receive(*r));
  EXPECT_EQ(done.op_id, 0u);
  EXPECT_EQ(done.at, 1000);  // the virtual peers were all there already
  ASSERT_TRUE(r->send(Wait{0, 0, 1, 1200, kNoLimit}).is_ok());
  ASSERT_TRUE(r->send(Marker{MarkerCode::kIterationBegin, 0, 1300}).is_ok());
  ASSERT_TRUE(r->send(Compute{0, 800, 500, "kernels"}).is_ok());  // started before the marker
  ASSERT_TRUE(r->send(Bye{0, 2000}).is_ok());
  Result<RankCapture> out = c.result();
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  EXPECT_EQ(out.value().rank, 2);
  EXPECT_EQ(out.value().world_size, 8);
  const std::string json = format_capture_json(out.value());
  for (const char* want :
       {"\"type\":\"hello\"", "\"type\":\"welcome\"", "\"type\":\"comm_init\"", "\"type\":\"op\"",
        "\"type\":\"complete\"", "\"type\":\"wait\"", "\"marker\":\"iteration_begin\"",
        "\"type\":\"compute\"", "\"type\":\"bye\""}) {
    EXPECT_THAT(json, HasSubstr(want));
  }
}

// The NCCL drop-in declares a communicator made with ncclCommInitRank by
// size, position and id hash: its members come from what the store learnt
// of the id (one rank: the rank itself), and are recorded with it, so the
// graph built from the capture has them. An id the store does not know
// leaves them unknown (after a short wait), as before.
TEST(ProgramCaptureTest, CommunicatorsDeclaredByIdGetTheirMembersFromTheStore) {
  auto ids = std::make_shared<CommIds>();
  ids->record(0xabc, {0, 2, 5, 7});
  ids->record(0xdef, {1, 3, 5, 7});  // another communicator: not this rank at position 1
  Running c(5000ms, 2, 8, {}, ids);
  std::unique_ptr<Connection> r = open_rank(c.address);
  ASSERT_TRUE(r);
  receive(*r);
  ASSERT_TRUE(r->send(CommInit{0, 4, 1, 0xabc, {}}).is_ok());
  ASSERT_TRUE(r->send(CommInit{1, 1, 0, 0x123, {}}).is_ok());
  ASSERT_TRUE(r->send(CommInit{2, 4, 1, 0xdef, {}}).is_ok());
  ASSERT_TRUE(r->send(wire::Op{0, 0, 1, OpCode::kSend, DType::kFloat32, 64, 3, 0, 0, 10}).is_ok());
  EXPECT_EQ(std::get<Complete>(receive(*r)).op_id, 0u);
  ASSERT_TRUE(r->send(Bye{0, 2000}).is_ok());
  Result<RankCapture> out = c.result();
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  std::vector<std::vector<std::int32_t>> declared;
  for (const CaptureEntry& e : out.value().entries)
    if (const auto* init = std::get_if<CommInit>(&e.message)) declared.push_back(init->members);
  ASSERT_EQ(declared.size(), 3u);
  EXPECT_EQ(declared[0], (std::vector<std::int32_t>{0, 2, 5, 7}));
  EXPECT_EQ(declared[1], (std::vector<std::int32_t>{2}));
  EXPECT_TRUE(declared[2].empty());
}

// PyTorch's new_group over every rank splits the world with the color of
// all its ranks: the capture answers with the world.
TEST(ProgramCaptureTest, ASplitKeepingTheWorldIsAnswered) {
  const std::vector<std::int32_t> world = {0, 1, 2, 3, 4, 5, 6, 7};
  Running c;
  std::unique_ptr<Connection> r = open_rank(c.address);
  ASSERT_TRUE(r);
  receive(*r);
  ASSERT_TRUE(r->send(CommInit{0, 8, 2, 0, {}}).is_ok());
  ASSERT_TRUE(r->send(CommSplit{0, 1, torch_split_color(world), 2}).is_ok());
  const auto info = std::get<CommInfo>(receive(*r));
  EXPECT_EQ(info.comm, 1u);
  EXPECT_EQ(info.rank_in_comm, 2);
  EXPECT_EQ(info.members, world);
  ASSERT_TRUE(
      r->send(wire::Op{0, 1, 1, OpCode::kAllReduce, DType::kFloat32, 64, 0, 0, 0, 10}).is_ok());
  EXPECT_EQ(std::get<Complete>(receive(*r)).op_id, 0u);
  ASSERT_TRUE(r->send(Bye{0, 20}).is_ok());
  Result<RankCapture> out = c.result();
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  const std::string json = format_capture_json(out.value());
  EXPECT_THAT(json, HasSubstr("\"type\":\"comm_split\""));
  EXPECT_THAT(json, HasSubstr("\"type\":\"comm_info\""));
}

// Rank 5 of 1,024 (torch's init_device_mesh(("dp", "tp"), (128, 8))) splits
// the world with `color`; the capture's answer, and how the capture ended.
struct SplitOutcome {
  Message answer;
  Result<RankCapture> capture;
};
SplitOutcome split_rank5_of_1024(std::int32_t color) {
  Running c(5000ms, 5, 1024);
  std::unique_ptr<Connection> r = open_rank(c.address, 5, 1024);
  if (!r) return {Error{}, Status::internal("no connection")};
  receive(*r);
  EXPECT_TRUE(r->send(CommInit{0, 1024, 5, 0, {}}).is_ok());
  EXPECT_TRUE(r->send(CommSplit{0, 1, color, 5}).is_ok());
  Message answer = receive(*r);
  if (std::holds_alternative<CommInfo>(answer)) {
    EXPECT_TRUE(r->send(Bye{0, 20}).is_ok());
  }
  return {answer, c.result()};
}

std::vector<std::int32_t> every(int step, int from, int to) {
  std::vector<std::int32_t> v;
  for (int r = from; r < to; r += step) v.push_back(r);
  return v;
}

TEST(ProgramCaptureTest, ATensorParallelSplitIsAnsweredWithItsMeshGroup) {
  const std::vector<std::int32_t> tp = every(1, 0, 8);
  SplitOutcome out = split_rank5_of_1024(torch_split_color(tp));
  ASSERT_TRUE(out.capture.is_ok()) << out.capture.status().message();
  const auto& info = std::get<CommInfo>(out.answer);
  EXPECT_EQ(info.comm, 1u);
  EXPECT_EQ(info.rank_in_comm, 5);
  EXPECT_EQ(info.members, tp);
}

TEST(ProgramCaptureTest, ADataParallelSplitIsAnsweredWithItsStridedGroup) {
  const std::vector<std::int32_t> dp = every(8, 5, 1024);  // 5, 13, ..., 1021
  ASSERT_EQ(dp.size(), 128u);
  SplitOutcome out = split_rank5_of_1024(torch_split_color(dp));
  ASSERT_TRUE(out.capture.is_ok()) << out.capture.status().message();
  const auto& info = std::get<CommInfo>(out.answer);
  EXPECT_EQ(info.rank_in_comm, 0);
  EXPECT_EQ(info.members, dp);
}

// torch's split_group (init_device_mesh on NCCL) colors a group by its
// lowest rank: 5 for rank 5's dp group, then 0 for its tp group, which only
// the job's grid groups tell apart from the other groups of those colors.
TEST(ProgramCaptureTest, ASplitGroupSplitIsAnsweredWithTheGridGroupItStarts) {
  const std::vector<std::int32_t> dp = every(8, 5, 1024);
  const std::vector<std::int32_t> tp = every(1, 0, 8);
  Running c(5000ms, 5, 1024, {dp, tp});
  std::unique_ptr<Connection> r = open_rank(c.address, 5, 1024);
  ASSERT_TRUE(r);
  receive(*r);
  ASSERT_TRUE(r->send(CommInit{0, 1024, 5, 0, {}}).is_ok());
  ASSERT_TRUE(r->send(CommSplit{0, 1, 5, 5}).is_ok());
  const auto first = std::get<CommInfo>(receive(*r));
  EXPECT_EQ(first.members, dp);
  EXPECT_EQ(first.rank_in_comm, 0);
  ASSERT_TRUE(r->send(CommSplit{0, 2, 0, 5}).is_ok());
  const auto second = std::get<CommInfo>(receive(*r));
  EXPECT_EQ(second.members, tp);
  EXPECT_EQ(second.rank_in_comm, 5);
  ASSERT_TRUE(r->send(Bye{0, 20}).is_ok());
  Result<RankCapture> out = c.result();
  ASSERT_TRUE(out.is_ok()) << out.status().message();
}

// Any other color would need the virtual ranks' colors.
TEST(ProgramCaptureTest, ASplitOfNoMeshGroupEndsTheCapture) {
  SplitOutcome out = split_rank5_of_1024(12345);
  EXPECT_EQ(std::get<Error>(out.answer).code, ErrorCode::kRejected);
  ASSERT_FALSE(out.capture.is_ok());
  EXPECT_EQ(out.capture.status().code(), StatusCode::kUnimplemented);
  EXPECT_THAT(out.capture.status().message(),
              HasSubstr("captured rank 5 split communicator 1 from 0 with color 12345: none of "
                        "the 56 groups of a mesh over the parent's 1024 ranks that hold it"));
}

TEST(ProgramCaptureTest, RejectsAnotherRankAndAnotherWorld) {
  Running c(300ms);
  std::unique_ptr<Connection> wrong = open_rank(c.address, 3);
  ASSERT_TRUE(wrong);
  EXPECT_THAT(std::get<Error>(receive(*wrong)).message,
              HasSubstr("rank 3 is not the rank being captured (2)"));
  std::unique_ptr<Connection> world = open_rank(c.address, 2, 16);
  ASSERT_TRUE(world);
  EXPECT_THAT(std::get<Error>(receive(*world)).message, HasSubstr("world size 16, the job has 8"));
  Result<RankCapture> out = c.result();  // nobody right connected: the timeout
  ASSERT_FALSE(out.is_ok());
  EXPECT_EQ(out.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(out.status().message(), HasSubstr("captured rank 2 did not connect within 0.3 s"));
}

TEST(ProgramCaptureTest, AnOpOnAnUndeclaredCommunicatorEndsTheCapture) {
  Running c;
  std::unique_ptr<Connection> r = open_rank(c.address);
  ASSERT_TRUE(r);
  receive(*r);
  ASSERT_TRUE(r->send(all_reduce(0, 10)).is_ok());
  EXPECT_EQ(std::get<Error>(receive(*r)).code, ErrorCode::kRejected);
  Result<RankCapture> out = c.result();
  ASSERT_FALSE(out.is_ok());
  EXPECT_THAT(out.status().message(),
              HasSubstr("captured rank 2 op 0: communicator 0 was never declared"));
}

TEST(ProgramCaptureTest, AClockGoingBackEndsTheCapture) {
  Running c;
  std::unique_ptr<Connection> r = open_rank(c.address);
  ASSERT_TRUE(r);
  receive(*r);
  ASSERT_TRUE(r->send(CommInit{0, 8, 2, 0, {}}).is_ok());
  ASSERT_TRUE(r->send(all_reduce(0, 500)).is_ok());
  receive(*r);
  ASSERT_TRUE(r->send(Marker{MarkerCode::kIterationBegin, 0, 400}).is_ok());
  Result<RankCapture> out = c.result();
  ASSERT_FALSE(out.is_ok());
  EXPECT_THAT(out.status().message(),
              HasSubstr("sent marker at 400 ns, before 500 ns: its clock went back"));
}

TEST(ProgramCaptureTest, AHangUpWithoutGoodbyeNamesTheLastOp) {
  Running c;
  {
    std::unique_ptr<Connection> r = open_rank(c.address);
    ASSERT_TRUE(r);
    receive(*r);
    ASSERT_TRUE(r->send(CommInit{0, 8, 2, 0, {}}).is_ok());
    ASSERT_TRUE(r->send(all_reduce(7, 500)).is_ok());
    receive(*r);
  }  // closed: the process died
  Result<RankCapture> out = c.result();
  ASSERT_FALSE(out.is_ok());
  EXPECT_EQ(out.status().code(), StatusCode::kUnavailable);  // a lost peer
  EXPECT_THAT(out.status().message(), HasSubstr("connection closed without a bye"));
  EXPECT_THAT(out.status().message(),
              HasSubstr("its last op: all_reduce of 4096 bytes (op 7), entered at 500 ns"));
}

TEST(ProgramCaptureTest, SilencePastTheTimeoutEndsTheCapture) {
  Running c(300ms);
  std::unique_ptr<Connection> r = open_rank(c.address);
  ASSERT_TRUE(r);
  receive(*r);
  Result<RankCapture> out = c.result();
  ASSERT_FALSE(out.is_ok());
  EXPECT_THAT(out.status().message(),
              HasSubstr("captured rank 2 sent nothing for 0.3 s; it had entered no op"));
}

}  // namespace
}  // namespace prism::runtime
