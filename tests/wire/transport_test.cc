// The wire's transport: a Server on a thread of its own, Connections from the
// test thread, over a Unix socket and TCP loopback; and every way a peer can
// go wrong (garbage, silence, hanging up) ends in a clear error, not a hang.
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "wire/address.h"
#include "wire/connection.h"
#include "wire/server.h"

#include "../support/descriptors.h"

namespace prism::wire {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// Answers Hello with Welcome and Op with Complete (1 us later); ignores the
// rest. Records what the server saw.
class EchoHandler : public ServerHandler {
 public:
  Server* server = nullptr;
  void on_message(PeerId peer, Message m) override {
    std::lock_guard lock(mu);
    ++messages;
    if (const auto* h = std::get_if<Hello>(&m)) {
      server->send(peer, Welcome{h->rank, h->world_size, 0, "test-job"});
    } else if (const auto* op = std::get_if<Op>(&m)) {
      server->send(peer, Complete{op->op_id, op->at + 1000});
    }
  }
  void on_close(PeerId, const Status& why) override {
    std::lock_guard lock(mu);
    closes.push_back(why);
  }
  std::vector<Status> closed() {
    std::lock_guard lock(mu);
    return closes;
  }
  std::mutex mu;
  int messages = 0;
  std::vector<Status> closes;
};

// A server running on its own thread for the test's life.
class Running {
 public:
  explicit Running(ServerOptions o = {}) : server_(handler, o) { handler.server = &server_; }
  ~Running() { stop(); }
  Address listen(const Address& a) {
    Result<Address> bound = server_.listen(a);
    EXPECT_TRUE(bound.is_ok()) << bound.status().message();
    return bound.is_ok() ? bound.value() : a;
  }
  void start() {
    thread_ = std::thread([this] {
      while (!done_) server_.run_for(5ms);
    });
  }
  void stop() {
    done_ = true;
    if (thread_.joinable()) thread_.join();
  }
  // Waits until the server has seen `n` closes.
  std::vector<Status> wait_closes(std::size_t n) {
    for (int i = 0; i < 400 && handler.closed().size() < n; ++i) std::this_thread::sleep_for(5ms);
    return handler.closed();
  }
  EchoHandler handler;

 private:
  Server server_;
  std::thread thread_;
  std::atomic<bool> done_{false};
};

std::string socket_path(const char* name) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("prism-wire-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

std::unique_ptr<Connection> open(const Address& a) {
  Result<std::unique_ptr<Connection>> c = Connection::open(a, 2000ms);
  EXPECT_TRUE(c.is_ok()) << c.status().message();
  return c.is_ok() ? std::move(c).value() : nullptr;
}

void exchange(Connection& c) {
  ASSERT_TRUE(c.send(Hello{3, 8, 3, ::getpid(), "transport_test"}).is_ok());
  Result<Message> w = c.receive(2000ms);
  ASSERT_TRUE(w.is_ok()) << w.status().message();
  EXPECT_EQ(std::get<Welcome>(w.value()).rank, 3);
  EXPECT_EQ(std::get<Welcome>(w.value()).job, "test-job");
  for (std::uint32_t i = 0; i < 100; ++i) {
    ASSERT_TRUE(c.send(Op{i, 0, 0, OpCode::kAllReduce, DType::kBFloat16, 4096, 0, 0, 0,
                          std::int64_t{i} * 10})
                    .is_ok());
    Result<Message> done = c.receive(2000ms);
    ASSERT_TRUE(done.is_ok()) << done.status().message();
    EXPECT_EQ(std::get<Complete>(done.value()).op_id, i);
    EXPECT_EQ(std::get<Complete>(done.value()).at, std::int64_t{i} * 10 + 1000);
  }
  ASSERT_TRUE(c.send(Bye{0, 5000}).is_ok());
  EXPECT_EQ(c.sent(), 102u);
  EXPECT_EQ(c.received(), 101u);
}

// One client exchanges with a server listening at `where`, then says bye:
// the server sees one orderly close.
void expect_exchange_and_orderly_bye(const Address& where) {
  Running s;
  const Address a = s.listen(where);
  EXPECT_EQ(a.to_string(), where.to_string());  // bound where it was asked
  s.start();
  {
    auto c = open(a);
    ASSERT_TRUE(c);
    exchange(*c);
  }
  const std::vector<Status> closes = s.wait_closes(1);
  ASSERT_EQ(closes.size(), 1u);
  EXPECT_TRUE(closes[0].is_ok()) << closes[0].message();
}

TEST(TransportTest, UnixSocketExchangeAndOrderlyBye) {
  expect_exchange_and_orderly_bye(Address{Address::Kind::kUnix, socket_path("a.sock"), "", 0});
}

TEST(TransportTest, TcpLoopbackGetsAPortAndExchanges) {
  Running s;
  const Address a = s.listen(Address{Address::Kind::kTcp, "", "127.0.0.1", 0});
  EXPECT_NE(a.port, 0);
  s.start();
  auto c = open(a);
  ASSERT_TRUE(c);
  exchange(*c);
}

// The seam for tests that run a server and its clients in one process: no
// socket file, no port.
TEST(TransportTest, InProcessChannelExchangesAndSaysByeInOrder) {
  const Address a{Address::Kind::kInProcess, "transport-test", "", 0};
  EXPECT_EQ(a.to_string(), "inproc:transport-test");
  expect_exchange_and_orderly_bye(a);
}

TEST(TransportTest, InProcessNamesAreOneServerEachAndGoWithIt) {
  const Address a{Address::Kind::kInProcess, "transport-test-names", "", 0};
  {
    Running s;
    s.listen(a);
    EchoHandler other;
    Server second(other, {});
    const Result<Address> taken = second.listen(a);
    ASSERT_FALSE(taken.is_ok());
    EXPECT_THAT(taken.status().message(), HasSubstr("the name is taken"));
  }
  const Result<std::unique_ptr<Connection>> gone = Connection::open(a, 500ms);
  ASSERT_FALSE(gone.is_ok());
  EXPECT_EQ(gone.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(gone.status().message(), HasSubstr("inproc:transport-test-names: cannot connect"));
}

TEST(TransportTest, SpinningReceiveGetsTheSameAnswers) {
  Running s;
  const Address a = s.listen(Address{Address::Kind::kUnix, socket_path("s.sock"), "", 0});
  s.start();
  auto c = open(a);
  ASSERT_TRUE(c);
  c->set_spin(std::chrono::microseconds(200));
  exchange(*c);
  // A spin longer than the timeout still ends at the timeout.
  c->set_spin(std::chrono::microseconds(500'000));
  ASSERT_TRUE(c->send(Marker{MarkerCode::kPhase, 0, 0}).is_ok());
  const auto t0 = std::chrono::steady_clock::now();
  Result<Message> r = c->receive(20ms);
  ASSERT_FALSE(r.is_ok());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2000ms);
}

TEST(TransportTest, SeveralPeersAtOnce) {
  Running s;
  const Address a = s.listen(Address{Address::Kind::kUnix, socket_path("b.sock"), "", 0});
  s.start();
  auto c1 = open(a), c2 = open(a);
  ASSERT_TRUE(c1 && c2);
  ASSERT_TRUE(c1->send(Hello{0, 2, 0, 1, "one"}).is_ok());
  ASSERT_TRUE(c2->send(Hello{1, 2, 1, 2, "two"}).is_ok());
  EXPECT_EQ(std::get<Welcome>(c2->receive(2000ms).value()).rank, 1);
  EXPECT_EQ(std::get<Welcome>(c1->receive(2000ms).value()).rank, 0);
}

TEST(TransportTest, GarbageGetsAnErrorAndTheConnectionEnds) {
  Running s;
  const std::string path = socket_path("c.sock");
  s.listen(Address{Address::Kind::kUnix, path, "", 0});
  s.start();
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path.c_str());
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  const std::string garbage = "GET / HTTP/1.1\r\n\r\n";
  ASSERT_EQ(::write(fd, garbage.data(), garbage.size()), static_cast<ssize_t>(garbage.size()));
  // The answer: one Error frame, then end of stream.
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) got.append(buf, n);
  ::close(fd);
  FrameDecoder d;
  d.feed(got);
  Result<std::optional<Message>> m = d.next();
  ASSERT_TRUE(m.is_ok() && m.value());
  const auto& e = std::get<Error>(*m.value());
  EXPECT_EQ(e.code, ErrorCode::kProtocol);
  EXPECT_THAT(e.message, HasSubstr("bad magic"));
  const std::vector<Status> closes = s.wait_closes(1);
  ASSERT_EQ(closes.size(), 1u);
  EXPECT_THAT(closes[0].message(), HasSubstr("c.sock peer 0: frame 0: bad magic"));
}

TEST(TransportTest, HangingUpWithoutByeIsReported) {
  Running s;
  const Address a = s.listen(Address{Address::Kind::kUnix, socket_path("d.sock"), "", 0});
  s.start();
  {
    auto c = open(a);
    ASSERT_TRUE(c && c->send(Hello{0, 1, 0, 1, "x"}).is_ok());
    ASSERT_TRUE(c->receive(2000ms).is_ok());
  }
  const std::vector<Status> closes = s.wait_closes(1);
  ASSERT_EQ(closes.size(), 1u);
  EXPECT_EQ(closes[0].code(), StatusCode::kUnavailable);
  EXPECT_THAT(closes[0].message(), HasSubstr("connection closed without a bye"));
}

TEST(TransportTest, SilentPeerIsClosedAfterTheIdleTimeout) {
  Running s(ServerOptions{100ms});
  const Address a = s.listen(Address{Address::Kind::kUnix, socket_path("e.sock"), "", 0});
  s.start();
  auto c = open(a);
  ASSERT_TRUE(c);
  const std::vector<Status> closes = s.wait_closes(1);
  ASSERT_EQ(closes.size(), 1u);
  EXPECT_EQ(closes[0].code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(closes[0].message(), HasSubstr("no message for 100 ms"));
  Result<Message> r = c->receive(2000ms);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("the coordinator closed the connection"));
}

TEST(TransportTest, APeerThatKeepsTalkingOutlivesTheIdleTimeout) {
  Running s(ServerOptions{100ms});
  const Address a = s.listen(Address{Address::Kind::kUnix, socket_path("h.sock"), "", 0});
  s.start();
  auto c = open(a);
  ASSERT_TRUE(c);
  for (std::uint32_t i = 0; i < 10; ++i) {  // 10 x 30 ms: three timeouts' worth
    std::this_thread::sleep_for(30ms);
    ASSERT_TRUE(c->send(Op{i, 0, 0, OpCode::kAllReduce, DType::kBFloat16, 8, 0, 0, 0, 0}).is_ok());
    Result<Message> r = c->receive(2000ms);
    ASSERT_TRUE(r.is_ok()) << r.status().message();
  }
  EXPECT_TRUE(s.handler.closed().empty());
}

TEST(TransportTest, NoAnswerInTimeIsAnError) {
  Running s;
  const Address a = s.listen(Address{Address::Kind::kUnix, socket_path("f.sock"), "", 0});
  s.start();
  auto c = open(a);
  ASSERT_TRUE(c && c->send(Marker{MarkerCode::kIterationBegin, 0, 0}).is_ok());
  Result<Message> r = c->receive(50ms);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(r.status().message(), HasSubstr("no answer within 50 ms"));
}

TEST(TransportTest, ConnectingToNothingIsAnError) {
  const Address a{Address::Kind::kUnix, socket_path("missing.sock"), "", 0};
  Result<std::unique_ptr<Connection>> c = Connection::open(a, 500ms);
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(c.status().message(), HasSubstr("missing.sock: cannot connect:"));
}

// Out of descriptors, the accept loop once spun (52,000 failed accepts in
// 3 s, issue 26). Now it warns once and tries again every 100 ms, and the
// connection waiting in the backlog is accepted once descriptors free up.
TEST(TransportTest, AcceptBacksOffWhileOutOfDescriptors) {
  Running s;
  const Address a = s.listen(Address{Address::Kind::kUnix, socket_path("e.sock"), "", 0});
  std::unique_ptr<Connection> c = open(a);  // in the backlog: the server does not run yet
  ASSERT_NE(c, nullptr);
  ::testing::internal::CaptureStderr();  // opens its file before the table is full
  testing::FullDescriptorTable table;
  ASSERT_TRUE(table.lowered());
  s.start();
  const auto cpu0 = testing::cpu_time();
  std::this_thread::sleep_for(1s);
  const auto spent = testing::cpu_time() - cpu0;
  const int full = table.full_errno();
  ASSERT_TRUE(table.release());
  EXPECT_EQ(full, EMFILE);
  EXPECT_LT(spent, 200ms) << "the accept loop spins";
  exchange(*c);  // accepted within a backoff
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, HasSubstr(a.to_string() + ": cannot accept a connection: Too many open files; "
                                             "trying again every 100 ms\n"));
  EXPECT_EQ(err.find("cannot accept"), err.rfind("cannot accept")) << "warned more than once";
}

TEST(TransportTest, ListeningTwiceOnOnePathFails) {
  Running s1, s2;
  const Address a{Address::Kind::kUnix, socket_path("g.sock"), "", 0};
  s1.listen(a);
  Result<Address> again = Server(s2.handler, {}).listen(a);
  ASSERT_FALSE(again.is_ok());
  EXPECT_THAT(again.status().message(), HasSubstr("cannot listen"));
}

}  // namespace
}  // namespace prism::wire
