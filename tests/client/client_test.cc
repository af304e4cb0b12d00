// The live rank's client against a fake coordinator (a wire::Server that
// answers each op `reply_after_ns` after it was entered, optionally after a
// real delay): the virtual clock, waits that sleep until the completion,
// late answers that are not counted, errors, and the C ABI.
#include "client/client.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "prism/client.h"
#include "wire/server.h"

extern "C" int prism_c_smoke(const char* address, char* error, size_t error_size);

namespace prism::client {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class FakeCoordinator : public wire::ServerHandler {
 public:
  FakeCoordinator() : server_(*this, {}) {
    const auto dir = std::filesystem::temp_directory_path() /
                     ("prism-client-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    static std::atomic<int> n{0};
    std::string name = std::to_string(n++);
    name += ".sock";
    address_ =
        server_.listen(wire::Address{wire::Address::Kind::kUnix, (dir / name).string(), "", 0})
            .value();
    thread_ = std::thread([this] {
      while (!done_) server_.run_for(2ms);
    });
  }
  ~FakeCoordinator() override {
    done_ = true;
    thread_.join();
  }

  void on_message(wire::PeerId peer, wire::Message m) override {
    std::lock_guard lock(mu_);
    seen_.push_back(m);
    if (const auto* h = std::get_if<wire::Hello>(&m)) {
      if (refuse_) {
        server_.send(peer, wire::Error{wire::ErrorCode::kRejected, "rank 9 is not in this job"});
        server_.close(peer);
        return;
      }
      server_.send(peer, wire::Welcome{h->rank, h->world_size, start_at_, "fake"});
    } else if (const auto* op = std::get_if<wire::Op>(&m)) {
      if (abort_) {
        server_.send(peer, wire::Error{wire::ErrorCode::kAborted, "rank 0 crashed"});
        server_.close(peer);
        return;
      }
      if (real_delay_.count() > 0) std::this_thread::sleep_for(real_delay_);
      server_.send(peer, wire::Complete{op->op_id, op->at + reply_after_ns_});
    }
  }
  void on_close(wire::PeerId, const Status&) override {}

  const wire::Address& address() const { return address_; }
  std::vector<wire::Message> seen() {
    std::lock_guard lock(mu_);
    return seen_;
  }
  // What the server thread has handled once it has `n` messages (or 2 s).
  std::vector<wire::Message> seen_at_least(std::size_t n) {
    for (int i = 0; i < 400 && seen().size() < n; ++i) std::this_thread::sleep_for(5ms);
    return seen();
  }
  std::int64_t start_at_ = 0;
  std::int64_t reply_after_ns_ = 0;
  std::chrono::milliseconds real_delay_{0};
  bool refuse_ = false;
  bool abort_ = false;

 private:
  wire::Server server_;
  wire::Address address_;
  std::thread thread_;
  std::atomic<bool> done_{false};
  std::mutex mu_;
  std::vector<wire::Message> seen_;
};

std::unique_ptr<Client> connect(const FakeCoordinator& f, std::int32_t rank = 0) {
  Failure failure = Failure::kNone;
  Result<std::unique_ptr<Client>> c =
      Client::connect(f.address(), {rank, 4, rank, "client_test"}, 5000ms, &failure);
  EXPECT_TRUE(c.is_ok()) << c.status().message();
  return c.is_ok() ? std::move(c).value() : nullptr;
}

wire::Op all_reduce() {
  wire::Op op;
  op.code = wire::OpCode::kAllReduce;
  op.bytes = 1 << 20;
  return op;
}

TEST(VirtualClockTest, RunsWithTheRealClockAndRestartsWhenLate) {
  const auto t0 = Clock::now();
  VirtualClock clock(1000, t0);
  EXPECT_EQ(clock.at(t0 + 5us), 6000);
  EXPECT_EQ(clock.real_at(11'000), t0 + 10us);
  // Released on time: nothing changes.
  EXPECT_EQ(clock.release(11'000, t0 + 10us).count(), 0);
  EXPECT_EQ(clock.at(t0 + 20us), 21'000);
  // Released 7 us late: virtual time at the release is the completion.
  EXPECT_EQ(clock.release(31'000, t0 + 37us).count(), 7000);
  EXPECT_EQ(clock.at(t0 + 37us), 31'000);
  EXPECT_EQ(clock.at(t0 + 40us), 34'000);
}

TEST(ClientTest, ClockStartsAtTheWelcome) {
  FakeCoordinator f;
  f.start_at_ = 5'000'000'000;
  auto c = connect(f);
  ASSERT_TRUE(c);
  EXPECT_GE(c->now(), 5'000'000'000);
  EXPECT_LT(c->now(), 5'000'000'000 + 1'000'000'000);
}

TEST(ClientTest, WaitHoldsTheRankUntilTheCompletion) {
  FakeCoordinator f;
  f.reply_after_ns_ = 20'000'000;  // 20 ms of emulated collective
  auto c = connect(f);
  ASSERT_TRUE(c);
  const auto t0 = Clock::now();
  Result<std::uint64_t> t = c->enter(all_reduce());
  ASSERT_TRUE(t.is_ok());
  Result<std::int64_t> done = c->completion(t.value());
  ASSERT_TRUE(done.is_ok());
  ASSERT_TRUE(c->wait(t.value()).is_ok());
  const auto waited = Clock::now() - t0;
  EXPECT_GE(waited, 20ms);
  EXPECT_LT(waited, 200ms);
  EXPECT_GE(c->now(), done.value());
  EXPECT_EQ(c->late().count(), 0);
}

TEST(ClientTest, LateAnswersAreNotCounted) {
  FakeCoordinator f;
  f.reply_after_ns_ = 1'000'000;  // the op completes 1 ms after it is entered...
  f.real_delay_ = 30ms;           // ...but the coordinator answers 30 ms later
  auto c = connect(f);
  ASSERT_TRUE(c);
  const std::int64_t before = c->now();
  Result<std::uint64_t> t = c->enter(all_reduce());
  ASSERT_TRUE(t.is_ok());
  ASSERT_TRUE(c->wait(t.value()).is_ok());
  // Virtual time moved ~1 ms, not ~30 ms; the rest is lateness.
  EXPECT_LT(c->now() - before, 10'000'000);
  EXPECT_GE(c->late(), 20ms);
}

TEST(ClientTest, OpsCompleteInAnyOrder) {
  FakeCoordinator f;
  f.reply_after_ns_ = 100'000;
  auto c = connect(f);
  ASSERT_TRUE(c);
  std::vector<std::uint64_t> tickets;
  for (int i = 0; i < 3; ++i) tickets.push_back(c->enter(all_reduce()).value());
  // Waiting for the last first keeps the earlier answers for later.
  ASSERT_TRUE(c->wait(tickets[2]).is_ok());
  ASSERT_TRUE(c->wait(tickets[0]).is_ok());
  ASSERT_TRUE(c->wait(tickets[1]).is_ok());
  const std::vector<wire::Message> seen = f.seen_at_least(4);
  ASSERT_EQ(seen.size(), 4u);  // hello and three ops, in order, with increasing at
  EXPECT_EQ(std::get<wire::Op>(seen[1]).op_id, 0u);
  EXPECT_LE(std::get<wire::Op>(seen[1]).at, std::get<wire::Op>(seen[3]).at);
}

TEST(ClientTest, UnknownTicketIsAnArgumentError) {
  FakeCoordinator f;
  auto c = connect(f);
  ASSERT_TRUE(c);
  Status s = c->wait(99);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(c->last_failure(), Failure::kArgument);
  EXPECT_THAT(s.message(), HasSubstr("ticket 99: not an op this rank entered"));
}

TEST(ClientTest, RefusedRankIsRejected) {
  FakeCoordinator f;
  f.refuse_ = true;
  Failure failure = Failure::kNone;
  Result<std::unique_ptr<Client>> c =
      Client::connect(f.address(), {3, 4, 3, "x"}, 5000ms, &failure);
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(failure, Failure::kRejected);
  EXPECT_THAT(c.status().message(), HasSubstr("refused rank 3: rank 9 is not in this job"));
}

TEST(ClientTest, AbortedEmulationEndsTheWait) {
  FakeCoordinator f;
  f.abort_ = true;
  auto c = connect(f);
  ASSERT_TRUE(c);
  Result<std::uint64_t> t = c->enter(all_reduce());
  ASSERT_TRUE(t.is_ok());
  Status s = c->wait(t.value());
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(c->last_failure(), Failure::kAborted);
  EXPECT_THAT(s.message(), HasSubstr("the coordinator: rank 0 crashed"));
}

TEST(ClientTest, NoCoordinatorIsAConnectError) {
  Failure failure = Failure::kNone;
  Result<std::unique_ptr<Client>> c =
      Client::connect(wire::Address{wire::Address::Kind::kUnix, "/nonexistent/prism.sock", "", 0},
                      {0, 1, 0, ""}, 500ms, &failure);
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(failure, Failure::kConnect);
}

TEST(CApiTest, ACProgramPlaysARank) {
  FakeCoordinator f;
  f.reply_after_ns_ = 50'000;
  char error[256] = {};
  EXPECT_EQ(prism_c_smoke(f.address().to_string().c_str(), error, sizeof error), 0) << error;
  EXPECT_THAT(error, HasSubstr("ticket 0: not an op this rank entered, or already waited for"));
  // hello, comm_init, op, marker, memory, compute, bye
  const std::vector<wire::Message> seen = f.seen_at_least(7);
  ASSERT_EQ(seen.size(), 7u);
  EXPECT_EQ(std::get<wire::Hello>(seen[0]).program, "c_smoke");
  EXPECT_EQ(std::get<wire::CommInit>(seen[1]).members, (std::vector<std::int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(std::get<wire::Op>(seen[2]).bytes, 1 << 20);
}

TEST(CApiTest, ArgumentErrorsSayWhat) {
  prism_client* c = nullptr;
  EXPECT_EQ(prism_connect("http://x", 0, 1, 0, "p", 100, &c), PRISM_ERR_ARGUMENT);
  EXPECT_THAT(prism_last_error(c), HasSubstr("unknown scheme"));
  EXPECT_EQ(prism_close(c, 0), PRISM_OK);
  EXPECT_EQ(prism_connect("unix:/x", 4, 4, 0, "p", 100, &c), PRISM_ERR_ARGUMENT);
  EXPECT_THAT(prism_last_error(c), HasSubstr("rank 4 of world size 4"));
  // Calls on a client whose connect failed are argument errors, not crashes.
  prism_op op{};
  std::uint64_t ticket = 0;
  EXPECT_EQ(prism_enter(c, &op, &ticket), PRISM_ERR_ARGUMENT);
  EXPECT_EQ(prism_now(c), 0);
  EXPECT_EQ(prism_close(c, 0), PRISM_OK);
  EXPECT_EQ(prism_connect("unix:/nonexistent/prism.sock", 0, 1, 0, "p", 100, &c),
            PRISM_ERR_CONNECT);
  EXPECT_THAT(prism_last_error(c), HasSubstr("cannot connect"));
  EXPECT_EQ(prism_close(c, 0), PRISM_OK);
  EXPECT_EQ(prism_close(nullptr, 0), PRISM_OK);
}

TEST(CApiTest, BadOpsAreRefusedBeforeTheWire) {
  FakeCoordinator f;
  prism_client* c = nullptr;
  ASSERT_EQ(prism_connect(f.address().to_string().c_str(), 0, 4, 0, "p", 5000, &c), PRISM_OK);
  prism_op op{};
  op.code = 42;
  std::uint64_t ticket = 0;
  EXPECT_EQ(prism_enter(c, &op, &ticket), PRISM_ERR_ARGUMENT);
  EXPECT_THAT(prism_last_error(c), HasSubstr("unknown op code 42"));
  op.code = PRISM_SEND;
  op.bytes = -1;
  EXPECT_EQ(prism_enter(c, &op, &ticket), PRISM_ERR_ARGUMENT);
  EXPECT_THAT(prism_last_error(c), HasSubstr("must not be negative"));
  EXPECT_EQ(prism_memory(c, 2, 0, 0, 0), PRISM_ERR_ARGUMENT);
  EXPECT_EQ(prism_marker(c, 9, 0), PRISM_ERR_ARGUMENT);
  EXPECT_EQ(prism_comm_init(c, 1, 4, 4, nullptr, 0), PRISM_ERR_ARGUMENT);
  EXPECT_EQ(prism_close(c, 0), PRISM_OK);
}

}  // namespace
}  // namespace prism::client
