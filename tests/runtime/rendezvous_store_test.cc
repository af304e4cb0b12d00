// The rendezvous store over real sockets, with a C++ client speaking each of
// torch's two dialects: every query type, blocking answers, and the answers
// for virtual ranks. rendezvous_store_torch_test.cc runs torch's own client.
#include "runtime/rendezvous_store.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "../support/descriptors.h"
#include "tcpstore_test_client.h"

namespace prism::runtime {
namespace tcpstore {
// Names the dialect in test names and failures.
void PrintTo(Dialect d, std::ostream* os) {
  *os << dialect_name(d);
}
}  // namespace tcpstore

namespace {

using namespace std::chrono_literals;
using store_testing::bytes_of;
using store_testing::Dialect;
using store_testing::dropped_after;
using store_testing::errors_after;
using store_testing::Op;
using store_testing::start_store;
using store_testing::string_of;
using store_testing::TestClient;
using store_testing::world;
using ::testing::HasSubstr;

class StoreTest : public ::testing::TestWithParam<Dialect> {
 protected:
  std::unique_ptr<TestClient> client() {
    auto c = std::make_unique<TestClient>(store_->port(), GetParam());
    EXPECT_TRUE(c->connected());
    return c;
  }
  bool validated() const { return GetParam() == Dialect::kValidated; }
  std::unique_ptr<RendezvousStore> store_ = start_store(world(4, {0, 1, 2, 3}));
};

TEST_P(StoreTest, KeepsKeysAsTorchsServerDoes) {
  auto c = client();
  c->set("/a", "1");
  EXPECT_EQ(string_of(*c->get("/a")), "1");
  EXPECT_EQ(c->add("/n", 5), 5);
  EXPECT_EQ(c->add("/n", -2), 3);
  EXPECT_EQ(string_of(*c->get("/n")), "3");

  c->send({.op = Op::kCheck, .keys = {"/a", "/n"}});
  EXPECT_EQ(c->read_u8(), tcpstore::kCheckReady);
  c->send({.op = Op::kCheck, .keys = {"/a", "/missing"}});
  EXPECT_EQ(c->read_u8(), tcpstore::kCheckNotReady);
  c->send({.op = Op::kGetNumKeys});
  EXPECT_EQ(c->read_value<std::int64_t>(), 2);

  // COMPARE_SET: absent + empty expected sets; absent + other expected
  // answers expected; present swaps only on a match.
  c->send({.op = Op::kCompareSet, .keys = {"/c"}, .values = {{}, bytes_of("x")}});
  EXPECT_EQ(string_of(*c->read_bytes()), "x");
  c->send({.op = Op::kCompareSet, .keys = {"/d"}, .values = {bytes_of("e"), bytes_of("y")}});
  EXPECT_EQ(string_of(*c->read_bytes()), "e");
  c->send({.op = Op::kCompareSet, .keys = {"/c"}, .values = {bytes_of("no"), bytes_of("z")}});
  EXPECT_EQ(string_of(*c->read_bytes()), "x");
  c->send({.op = Op::kCompareSet, .keys = {"/c"}, .values = {bytes_of("x"), bytes_of("z")}});
  EXPECT_EQ(string_of(*c->read_bytes()), "z");

  c->send({.op = Op::kDeleteKey, .keys = {"/c"}});
  EXPECT_EQ(c->read_value<std::int64_t>(), 1);
  c->send({.op = Op::kDeleteKey, .keys = {"/c"}});
  EXPECT_EQ(c->read_value<std::int64_t>(), 0);

  c->send({.op = Op::kAppend, .keys = {"/a"}, .values = {bytes_of("23")}});
  c->send({.op = Op::kMultiSet, .keys = {"/m1", "/m2"}, .values = {bytes_of("p"), bytes_of("q")}});
  c->send({.op = Op::kMultiGet, .keys = {"/a", "/m1", "/m2"}});
  EXPECT_EQ(string_of(*c->read_bytes()), "123");
  EXPECT_EQ(string_of(*c->read_bytes()), "p");
  EXPECT_EQ(string_of(*c->read_bytes()), "q");
  EXPECT_TRUE(store_->errors().empty());
}

TEST_P(StoreTest, BlockingGetIsAnsweredWhenAnotherClientSets) {
  auto waiter = client();
  auto setter = client();
  waiter->send({.op = Op::kGet, .keys = {"/late"}});
  waiter->send({.op = Op::kGetNumKeys});  // held behind the GET
  EXPECT_FALSE(waiter->read(1, 200ms));
  setter->set("/late", "here");
  EXPECT_EQ(string_of(*waiter->read_bytes()), "here");
  EXPECT_EQ(waiter->read_value<std::int64_t>(), 1);
}

TEST_P(StoreTest, WaitIsAnsweredWhenEveryKeyIsThere) {
  auto waiter = client();
  auto setter = client();
  waiter->send({.op = Op::kWait, .keys = {"/w1", "/w2"}});
  setter->set("/w1", "1");
  EXPECT_FALSE(waiter->read(1, 200ms));
  EXPECT_EQ(setter->add("/w2", 1), 1);
  EXPECT_EQ(waiter->read_u8(), tcpstore::kStopWaiting);
  waiter->send({.op = Op::kWait, .keys = {"/w1"}});  // already there
  EXPECT_EQ(waiter->read_u8(), tcpstore::kStopWaiting);
}

TEST(RendezvousStore, CancelWaitEndsAWaitTheClientGaveUpOn) {  // torch 2.x only
  auto store = start_store(world(1, {0}));
  auto waiter = std::make_unique<TestClient>(store->port(), Dialect::kValidated);
  auto setter = std::make_unique<TestClient>(store->port(), Dialect::kValidated);
  waiter->send({.op = Op::kWait, .keys = {"/never"}});
  waiter->send({.op = Op::kCancelWait});
  EXPECT_EQ(waiter->read_u8(), tcpstore::kWaitCanceled);
  setter->set("/never", "now");
  EXPECT_FALSE(waiter->read(1, 200ms));  // no stale STOP_WAITING
}

TEST(RendezvousStore, PingQueuesAndListIn2x) {
  auto store = start_store(world(1, {0}));
  auto client = [&] { return std::make_unique<TestClient>(store->port(), Dialect::kValidated); };
  auto c = client();
  c->send({.op = Op::kPing, .word = 77});
  EXPECT_EQ(c->read_value<std::uint32_t>(), 77u);

  auto popper = client();
  popper->send({.op = Op::kWait, .keys = {"/q"}});  // queue_pop(block=True)
  c->send({.op = Op::kQueuePush, .keys = {"/q"}, .values = {bytes_of("one")}});
  c->send({.op = Op::kQueuePush, .keys = {"/q"}, .values = {bytes_of("two")}});
  c->send({.op = Op::kQueueLen, .keys = {"/q"}});
  EXPECT_EQ(c->read_value<std::int64_t>(), 2);
  EXPECT_EQ(popper->read_u8(), tcpstore::kStopWaiting);
  popper->send({.op = Op::kQueuePop, .keys = {"/q"}});
  EXPECT_EQ(popper->read_value<std::int64_t>(), 2);
  EXPECT_EQ(string_of(*popper->read_bytes()), "one");
  c->send({.op = Op::kQueueLen, .keys = {"/q"}});
  EXPECT_EQ(c->read_value<std::int64_t>(), 1);
  c->send({.op = Op::kQueuePop, .keys = {"/empty"}});
  EXPECT_EQ(c->read_value<std::int64_t>(), 0);

  c->set("/b", "1");
  c->set("/a", "2");
  c->send({.op = Op::kList});
  EXPECT_EQ(c->read_value<std::int64_t>(), 2);
  EXPECT_EQ(string_of(*c->read_bytes()), "/a");  // sorted: deterministic
  EXPECT_EQ(string_of(*c->read_bytes()), "/b");
}

TEST(RendezvousStore, WatchKeyIn113) {
  auto store = start_store(world(1, {0}));
  auto watcher = std::make_unique<TestClient>(store->port(), Dialect::kLegacy);
  auto c = std::make_unique<TestClient>(store->port(), Dialect::kLegacy);
  watcher->send({.op = Op::kWatchKey, .keys = {"/w"}});
  EXPECT_EQ(watcher->read_u8(), tcpstore::kKeyCallbackRegistered);
  c->set("/w", "1");
  c->set("/w", "2");
  c->send({.op = Op::kDeleteKey, .keys = {"/w"}});
  for (auto [type, old_value, new_value] :
       {std::tuple{tcpstore::kKeyCreated, "", "1"}, std::tuple{tcpstore::kKeyUpdated, "1", "2"},
        std::tuple{tcpstore::kKeyDeleted, "2", ""}}) {
    EXPECT_EQ(watcher->read_u8(), type);
    EXPECT_EQ(string_of(*watcher->read_bytes()), "/w");
    EXPECT_EQ(string_of(*watcher->read_bytes()), old_value);
    EXPECT_EQ(string_of(*watcher->read_bytes()), new_value);
  }
}

// A malformed query drops its client, named once, without an error of the
// run (issue 26: it ended the whole emulation); an ADD to a non-number is.
TEST_P(StoreTest, MalformedQueriesCloseTheClientWithAnError) {
  auto c = client();
  c->set("/ok", "1");  // 1 + 8 + 3 + 8 + 1 bytes
  c->send_raw({200});
  EXPECT_TRUE(c->closed_by_server());
  auto dropped = dropped_after(*store_, 1);
  ASSERT_EQ(dropped.size(), 1u);
  const std::size_t offset = validated() ? 26 : 21;  // VALIDATE is 5 bytes
  EXPECT_THAT(dropped[0], HasSubstr(fmt::format("byte {}: unknown query type 200", offset)));
  EXPECT_THAT(dropped[0], HasSubstr("client 1 (127.0.0.1:"));
  EXPECT_TRUE(store_->errors().empty());

  auto other = client();  // the store still serves
  EXPECT_EQ(string_of(*other->get("/ok")), "1");
  other->set("/text", "abc");
  EXPECT_FALSE(other->add("/text", 1));
  EXPECT_THAT(errors_after(*store_, 1).back(),
              HasSubstr("ADD 1 to key '/text', whose value 'abc' is not an integer"));
  EXPECT_EQ(store_->dropped().size(), 1u);
}

// A stranger on the port sends garbage while a rank waits in a blocking GET:
// only the stranger is closed, the rank is answered, and the run has no error.
TEST_P(StoreTest, AStrangersGarbageDropsOnlyThatClient) {
  auto waiter = client();
  auto setter = client();
  waiter->send({.op = Op::kGet, .keys = {"/late"}});
  TestClient stranger(store_->port(), Dialect::kLegacy);
  stranger.send_raw(bytes_of("GET / HTTP/1.1\r\n\r\n"));
  EXPECT_TRUE(stranger.closed_by_server());
  setter->set("/late", "here");
  EXPECT_EQ(string_of(*waiter->read_bytes()), "here");
  EXPECT_EQ(setter->add("/n", 2), 2);
  EXPECT_THAT(dropped_after(*store_, 1),
              ::testing::ElementsAre(HasSubstr("unknown query type 71")));
  EXPECT_TRUE(store_->errors().empty());
}

// ADD's sum outside int64 was a signed overflow (UBSan, issue 26): the
// client is refused by name and the counter keeps its value.
TEST_P(StoreTest, AddsPastTheInt64RangeAreRefused) {
  const std::int64_t max = std::numeric_limits<std::int64_t>::max();
  auto c = client();
  EXPECT_EQ(c->add("/n", max), max);
  EXPECT_FALSE(c->add("/n", 1));
  auto errors = errors_after(*store_, 1);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0], HasSubstr(fmt::format("ADD 1 to key '/n', whose value is {}: the sum is "
                                               "outside the 64-bit integers",
                                               max)));
  auto other = client();
  EXPECT_EQ(string_of(*other->get("/n")), std::to_string(max));
  EXPECT_EQ(other->add("/m", std::numeric_limits<std::int64_t>::min()),
            std::numeric_limits<std::int64_t>::min());
  EXPECT_FALSE(other->add("/m", -1));
}

TEST(RendezvousStore, AnAddPastTheInt64RangeWithTheVirtualRanksIsRefused) {
  auto store = start_store(world(64, {0}));  // "init/" counts 63 virtual ranks first
  TestClient c(store->port(), Dialect::kValidated);
  EXPECT_FALSE(c.add("init/", std::numeric_limits<std::int64_t>::max() - 10));
  auto errors = errors_after(*store, 1);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0], HasSubstr("which counts 63 virtual ranks: the sum is outside the 64-bit "
                                   "integers; closing the connection"));
}

INSTANTIATE_TEST_SUITE_P(BothDialects, StoreTest,
                         ::testing::Values(Dialect::kLegacy, Dialect::kValidated),
                         [](const auto& info) {
                           return info.param == Dialect::kLegacy ? "Torch113" : "Torch2x";
                         });

TEST(RendezvousStore, GarbageIsNamedWithTheClientAndOffset) {
  auto store = start_store(world(2, {0, 1}));
  TestClient c(store->port(), Dialect::kLegacy);
  c.send_raw(bytes_of("GET / HTTP/1.1\r\n\r\n"));
  EXPECT_TRUE(c.closed_by_server());
  auto errors = dropped_after(*store, 1);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0], HasSubstr("byte 0: unknown query type 71 (torch 1.13-2.1 protocol); "
                                   "closing the connection"));
}

// Out of descriptors, the store's poll loop once spun on its readable
// listening socket (issue 26); now it waits 100 ms between tries, and the
// waiting client is served once descriptors free up.
TEST(RendezvousStore, AcceptBacksOffWhileOutOfDescriptors) {
  auto store = start_store(world(2, {0, 1}));
  const int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(client, 0);
  ::testing::internal::CaptureStderr();  // opens its file before the table is full
  testing::FullDescriptorTable table;
  ASSERT_TRUE(table.lowered());
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(store->port());
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int connected = ::connect(client, reinterpret_cast<sockaddr*>(&to), sizeof to);
  const auto cpu0 = testing::cpu_time();
  std::this_thread::sleep_for(1s);
  const auto spent = testing::cpu_time() - cpu0;
  ASSERT_TRUE(table.release());
  ASSERT_EQ(connected, 0);
  EXPECT_LT(spent, 200ms) << "the accept loop spins";
  const tcpstore::Bytes add =
      tcpstore::encode(Dialect::kLegacy, {.op = Op::kAdd, .keys = {"/n"}, .delta = 5});
  ASSERT_EQ(::send(client, add.data(), add.size(), 0), static_cast<ssize_t>(add.size()));
  pollfd p{client, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 2000), 1) << "not served";
  std::int64_t sum = 0;
  EXPECT_EQ(::recv(client, &sum, sizeof sum, MSG_WAITALL), static_cast<ssize_t>(sizeof sum));
  EXPECT_EQ(sum, 5);
  ::close(client);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, HasSubstr("rendezvous store: cannot accept a connection: Too many open files; "
                             "trying again every 100 ms\n"));
  EXPECT_EQ(err.find("cannot accept"), err.rfind("cannot accept")) << "warned more than once";
}

TEST(RendezvousStore, StopsPromptlyWhileClientsBlock) {
  auto store = start_store(world(2, {0, 1}));
  TestClient getter(store->port(), Dialect::kValidated);
  TestClient waiter(store->port(), Dialect::kLegacy);
  getter.send({.op = Op::kGet, .keys = {"/never"}});
  waiter.send({.op = Op::kWait, .keys = {"/never"}});
  EXPECT_FALSE(getter.read(1, 100ms));
  const auto t0 = std::chrono::steady_clock::now();
  store.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  EXPECT_TRUE(getter.closed_by_server(1s));
  EXPECT_TRUE(waiter.closed_by_server(1s));
}

TEST(RendezvousStore, RefusesBadOptionsAndBusyPorts) {
  auto bad = RendezvousStore::start("127.0.0.1", 0, world(4, {0, 4}));
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().message(),
            "rendezvous store: real ranks: rank 4 is outside the world of 4 ranks");
  auto first = start_store(world(1, {0}));
  auto busy = RendezvousStore::start("127.0.0.1", first->port(), world(1, {0}));
  ASSERT_FALSE(busy.is_ok());
  EXPECT_THAT(busy.status().message(),
              HasSubstr(fmt::format("cannot listen on 127.0.0.1:{}: Address already in use",
                                    first->port())));
}

}  // namespace
}  // namespace prism::runtime
