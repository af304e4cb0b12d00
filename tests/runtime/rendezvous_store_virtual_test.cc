// The rendezvous store's answers for virtual ranks: rank counters, NCCL ids
// of virtual publishers, group declarations, refused Gloo groups, objects
// of virtual senders.
#include <atomic>
#include <memory>
#include <mutex>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/comm_ids.h"
#include "runtime/rendezvous_store.h"
#include "runtime/rendezvous_store_keys.h"
#include "tcpstore_test_client.h"
#include "util/hash.h"

namespace prism::runtime {
namespace {

using namespace std::chrono_literals;
using store_testing::Bytes;
using store_testing::bytes_of;
using store_testing::Dialect;
using store_testing::errors_after;
using store_testing::Op;
using store_testing::string_of;
using store_testing::TestClient;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Keys as torch writes them through TORCHELASTIC_USE_AGENT_STORE's prefix.
constexpr const char* kBarrier113 = "//worker/attempt_0/default_pg/store_based_barrier_key:1";
constexpr const char* kId113 = "//worker/attempt_0/default_pg/0/0";
constexpr const char* kId2x = "//worker/attempt_0/default_pg/0//cuda//0";

std::unique_ptr<RendezvousStore> start_store(
    std::int32_t n, std::vector<std::int32_t> real,
    std::map<std::string, std::vector<std::int32_t>> groups = {},
    std::chrono::milliseconds unknown = 60s) {
  StoreOptions o = store_testing::world(n, std::move(real));
  o.groups = std::move(groups);
  o.unknown_publisher_timeout = unknown;
  return store_testing::start_store(std::move(o));
}

Bytes id_of(std::string_view key) {
  return store_keys::synthesized_id(key);
}

TEST(RendezvousStoreVirtual, BarrierCountsTheVirtualRanksAsArrived) {
  auto store = start_store(64, {0});
  TestClient rank0(store->port(), Dialect::kLegacy);
  EXPECT_EQ(rank0.add(kBarrier113, 1), 64);  // 1.13 compares with ==
  EXPECT_EQ(rank0.add(kBarrier113, 0), 64);
  EXPECT_EQ(rank0.add("init/", 1), 64);  // TCPStore's waitForWorkers

  auto two = start_store(64, {0, 63});
  TestClient a(two->port(), Dialect::kValidated);
  TestClient b(two->port(), Dialect::kValidated);
  const std::string key = "//worker/attempt_0/default_pg/store_based_barrier_key:0";
  EXPECT_EQ(a.add(key, 1), 63);
  EXPECT_EQ(b.add(key, 1), 64);  // the last real rank completes the count
  EXPECT_EQ(a.add("/other_counter", 1), 1);
}

TEST(RendezvousStoreVirtual, LocalBarrierOfADeclaredGroupCountsItsMembers) {
  // 2.x's use_local_synchronization names the group (and its barrier) by a hash.
  auto store = start_store(64, {2, 40}, {{"9c1b2e", {2, 3, 40, 41}}});
  TestClient c(store->port(), Dialect::kValidated);
  EXPECT_EQ(c.add("/default_pg/9c1b2e/store_based_barrier_key:9c1b2e", 1), 3);
  EXPECT_EQ(c.add("/default_pg/9c1b2e/store_based_barrier_key:9c1b2e", 1), 4);
}

TEST(RendezvousStoreVirtual, IdsOfVirtualRootsAreSynthesized) {
  auto store = start_store(64, {3, 7});
  for (Dialect d : {Dialect::kLegacy, Dialect::kValidated}) {
    TestClient c(store->port(), d);
    for (const char* key : {kId113, kId2x}) {
      c.send({.op = Op::kWait, .keys = {key}});  // torch's get() waits first
      EXPECT_EQ(c.read_u8(), tcpstore::kStopWaiting) << key;
      EXPECT_EQ(c.get(key), id_of(key)) << key;
    }
  }
  // A send/recv pair is published by its lower rank: 2 is virtual, 3 is real.
  TestClient c(store->port(), Dialect::kValidated);
  EXPECT_EQ(c.get("/default_pg/0//cuda//2:3"), id_of("/default_pg/0//cuda//2:3"));
  c.send({.op = Op::kGet, .keys = {"/default_pg/0//cuda//3:7"}});
  EXPECT_FALSE(c.read(1, 200ms));  // rank 3 is real: it will publish
  EXPECT_TRUE(store->errors().empty());
}

TEST(RendezvousStoreVirtual, ARealRootsSetWins) {
  auto store = start_store(64, {0, 5});
  TestClient rank5(store->port(), Dialect::kLegacy);
  TestClient rank0(store->port(), Dialect::kLegacy);
  rank5.send({.op = Op::kWait, .keys = {kId113}});
  EXPECT_FALSE(rank5.read(1, 200ms));
  const std::string real_id(128, 'r');
  rank0.set(kId113, real_id);
  EXPECT_EQ(rank5.read_u8(), tcpstore::kStopWaiting);
  EXPECT_EQ(string_of(*rank5.get(kId113)), real_id);
}

TEST(RendezvousStoreVirtual, ScalableInitRootsAreSynthesizedOrAwaited) {
  // 300 ranks, 3 roots (TORCH_NCCL_RANKS_PER_ROOT=128): roots at 0, 100, 200.
  auto store = start_store(300, {0, 150});
  TestClient rank150(store->port(), Dialect::kValidated);
  TestClient rank0(store->port(), Dialect::kValidated);
  const std::string p = "//worker/attempt_0/default_pg/0//cuda//UniqueNCCLID:";
  const std::vector<std::string> keys = {p + "0", p + "1", p + "2"};
  rank150.send({.op = Op::kWait, .keys = keys});
  EXPECT_FALSE(rank150.read(1, 200ms));  // root 0 is real rank 0
  rank0.set(keys[0], "root0");
  EXPECT_EQ(rank150.read_u8(), tcpstore::kStopWaiting);
  rank150.send({.op = Op::kMultiGet, .keys = keys});
  EXPECT_EQ(string_of(*rank150.read_bytes()), "root0");
  EXPECT_EQ(rank150.read_bytes(), id_of(keys[1]));
  EXPECT_EQ(rank150.read_bytes(), id_of(keys[2]));
  // A query naming one root: ceil(300 / 128) = 3 roots, root 1 is rank 100.
  const std::string lone = "/default_pg/0//cuda//UniqueNCCLID:1";
  EXPECT_EQ(rank150.get(lone), id_of(lone));
}

TEST(RendezvousStoreVirtual, SubgroupsAreDeclaredBySideKey) {
  auto store = start_store(16, {9});
  TestClient rank9(store->port(), Dialect::kLegacy);
  const std::string key = "//worker/attempt_0/default_pg/5/0";  // group "5", counter 0
  rank9.send({.op = Op::kGet, .keys = {key}});
  EXPECT_FALSE(rank9.read(1, 200ms));  // group 5 unknown: its root may be real
  TestClient frontend(store->port(), Dialect::kLegacy);
  frontend.set("//worker/attempt_0/prism/group/5", "8, 9,10,11");
  EXPECT_EQ(rank9.read_bytes(), id_of(key));  // group rank 0 is global 8: virtual
  EXPECT_TRUE(store->errors().empty());
}

// torch 2.11 nests a new group's keys in the default group's store: the
// keys Megatron-Core's pipeline group and data-parallel group (scalable
// init, 2 roots) asked for on an H200, with their roots virtual.
TEST(RendezvousStoreVirtual, NestedGroupStoresOfTorch211AreAnswered) {
  auto store = start_store(1024, {256});
  TestClient rank256(store->port(), Dialect::kValidated);
  rank256.set("/default_pg/prism/group/2313", "0,256,512,768");
  const std::string pp = "/default_pg/0//2313//cuda//0";
  EXPECT_EQ(rank256.get(pp), id_of(pp));
  std::string dp;
  for (int r = 0; r < 256; ++r) dp += (r ? "," : "") + std::to_string(r + 256);
  rank256.set("/default_pg/prism/group/5", dp);
  const std::vector<std::string> roots = {"/default_pg/0//5//cuda//UniqueNCCLID:0",
                                          "/default_pg/0//5//cuda//UniqueNCCLID:1"};
  // Rank 256 is root 0 (group rank 0) and publishes its own; root 1 (group
  // rank 128, global 384) is virtual.
  rank256.set(roots[0], "real-id");
  rank256.send({.op = Op::kMultiGet, .keys = roots});
  EXPECT_EQ(string_of(*rank256.read_bytes()), "real-id");
  EXPECT_EQ(rank256.read_bytes(), id_of(roots[1]));
  EXPECT_TRUE(store->errors().empty());
}

// The NCCL drop-in declares a communicator by size, position and the hash
// of its id; the store tells whose it is (on_comm_id), here with the keys
// Megatron-Core's groups made on an H200 under torch 2.11: its pipeline
// group (a synthesized id), its data-parallel group of 256 (ncclCommInit-
// RankScalable: one real root, one virtual, hashed together in root order),
// a one-rank group and a send/recv pair.
TEST(RendezvousStoreVirtual, CommunicatorIdsTellTheirMembers) {
  StoreOptions o = store_testing::world(1024, {256});
  auto ids = std::make_shared<CommIds>();
  o.on_comm_id = [ids](std::uint64_t h, const std::vector<std::int32_t>& m) { ids->record(h, m); };
  auto store = store_testing::start_store(std::move(o));
  TestClient rank256(store->port(), Dialect::kValidated);
  rank256.set("/default_pg/prism/group/2313", "0,256,512,768");
  const std::string pp = "/default_pg/0//2313//cuda//0";
  const Bytes pp_id = *rank256.get(pp);
  EXPECT_THAT(ids->members(fnv1a(pp_id.data(), pp_id.size())), ElementsAre(0, 256, 512, 768));

  std::string dp;
  for (int r = 0; r < 256; ++r) dp += (r ? "," : "") + std::to_string(r + 256);
  rank256.set("/default_pg/prism/group/6", dp);
  const std::vector<std::string> roots = {"/default_pg/0//6//cuda//UniqueNCCLID:0",
                                          "/default_pg/0//6//cuda//UniqueNCCLID:1"};
  rank256.set(roots[0], "real-id");
  rank256.send({.op = Op::kMultiGet, .keys = roots});
  const Bytes root0 = *rank256.read_bytes();
  const Bytes root1 = *rank256.read_bytes();
  const std::uint64_t both = fnv1a(root1.data(), root1.size(), fnv1a(root0.data(), root0.size()));
  const std::vector<std::int32_t> dp_members = ids->members(both);
  ASSERT_EQ(dp_members.size(), 256u);
  EXPECT_EQ(dp_members.front(), 256);
  EXPECT_EQ(dp_members.back(), 511);

  rank256.set("/default_pg/prism/group/2057", "256");
  const Bytes solo = bytes_of("solo-id");
  rank256.set("/default_pg/0//2057//cuda//0", "solo-id");
  EXPECT_THAT(ids->members(fnv1a(solo.data(), solo.size()), 2s), ElementsAre(256));

  // A pair of group ranks 3:1 of group 2313: group rank 1 (global 256)
  // publishes, and is the pair's rank 0.
  const Bytes pair = bytes_of("pair-id");
  rank256.set("/default_pg/0//2313//cuda//1:3", "pair-id");
  EXPECT_THAT(ids->members(fnv1a(pair.data(), pair.size()), 2s), ElementsAre(256, 768));
  EXPECT_TRUE(ids->members(12345).empty());
  EXPECT_TRUE(store->errors().empty());
}

// PRISM_STORE_TRACE=1's lines: each NCCL id asked for, each declaration,
// each read left waiting.
TEST(RendezvousStoreVirtual, TraceSaysWhatIsAskedAndWhoPublishes) {
  StoreOptions o = store_testing::world(16, {9});
  auto lines = std::make_shared<std::vector<std::string>>();
  auto mu = std::make_shared<std::mutex>();
  o.on_trace = [lines, mu](const std::string& l) {
    std::lock_guard lock(*mu);
    lines->push_back(l);
  };
  auto store = store_testing::start_store(std::move(o));
  TestClient rank9(store->port(), Dialect::kValidated);
  rank9.set("/default_pg/prism/group/3", "8,9");
  EXPECT_EQ(rank9.get("/default_pg/0//3//cuda//0"), id_of("/default_pg/0//3//cuda//0"));
  rank9.send({.op = Op::kGet, .keys = {"/not_yet"}});
  EXPECT_FALSE(rank9.read(1, 100ms));
  std::lock_guard lock(*mu);
  ASSERT_GE(lines->size(), 3u);
  EXPECT_THAT((*lines)[0], HasSubstr("declares group '3' as '8,9'"));
  EXPECT_THAT((*lines)[1],
              HasSubstr("asks for '/default_pg/0//3//cuda//0': the NCCL unique id published by "
                        "its group rank 0 of group '3' (2 ranks), publisher rank 8 (virtual), "
                        "absent"));
  EXPECT_THAT(lines->back(), HasSubstr("waits for absent key '/not_yet'"));
}

TEST(RendezvousStoreVirtual, BadDeclarationsAreReported) {
  auto store = start_store(16, {9}, {{"5", {8, 9}}});
  TestClient c(store->port(), Dialect::kLegacy);
  c.set("/prism/group/6", "1,x");
  c.set("/prism/group/7", "1,99");
  c.set("/prism/group/5", "9,8");
  EXPECT_EQ(c.add("/still_served", 1), 1);
  auto errors = errors_after(*store, 3);
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_THAT(errors[0], HasSubstr("declaration of process group '6' as '1,x': item 2 ('x') "
                                   "is not a rank; ignored"));
  EXPECT_THAT(errors[1], HasSubstr("rank 99 is outside the world of 16 ranks"));
  EXPECT_THAT(errors[2], HasSubstr("it was declared as '8,9' before"));
}

TEST(RendezvousStoreVirtual, UnplacedPublishersAreReportedAfterTheTimeout) {
  auto store = start_store(16, {9}, {}, 200ms);
  TestClient rank9(store->port(), Dialect::kValidated);
  const std::string key = "/default_pg/7//cuda//0";
  rank9.send({.op = Op::kWait, .keys = {key}});
  auto errors = errors_after(*store, 1);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0], HasSubstr("real ranks have waited 0.2 s for store key "
                                   "'/default_pg/7//cuda//0', the NCCL unique id published by "
                                   "its group rank 0 of process group '7'"));
  EXPECT_THAT(errors[0], HasSubstr("SET 'prism/group/7' = '0,2,4'"));
  EXPECT_FALSE(rank9.closed_by_server(100ms));  // still waiting: a declaration may come
}

TEST(RendezvousStoreVirtual, GlooGroupsWithVirtualRanksAreRefused) {
  auto store = start_store(8, {1, 5});
  TestClient rank1(store->port(), Dialect::kLegacy);
  // ProcessGroupGloo of the default group: rank 1 publishes its host name,
  // then reads rank 0's.
  rank1.set("//worker/attempt_0/default_pg/0/0/rank_1", "host");
  EXPECT_TRUE(rank1.closed_by_server());
  auto errors = errors_after(*store, 1);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0],
              HasSubstr("rank 1 created a Gloo process group that PrismLLM cannot interpose "
                        "(group '0', store key '//worker/attempt_0/default_pg/0/0/rank_1'): its "
                        "rank 0 (global rank 0) is virtual and cannot publish a Gloo address. Run "
                        "it with PrismLLM's backend (`prism emulate` maps backend='gloo' to it"));

  // An undeclared group: group rank 2 with two real ranks means a virtual one.
  TestClient other(store->port(), Dialect::kValidated);
  other.send({.op = Op::kWait, .keys = {"/default_pg/3//cpu//0/2"}});
  EXPECT_TRUE(other.closed_by_server());
  EXPECT_THAT(errors_after(*store, 2).back(),
              HasSubstr("a real rank created a Gloo process group that PrismLLM cannot "
                        "interpose (group '3', store key '/default_pg/3//cpu//0/2'): it has more "
                        "than 2 ranks but only 2 ranks are real"));
}

TEST(RendezvousStoreVirtual, GlooGroupsOfRealRanksWork) {
  auto store = start_store(8, {1, 5}, {{"2", {1, 5}}});
  TestClient rank1(store->port(), Dialect::kValidated);
  TestClient rank5(store->port(), Dialect::kValidated);
  rank1.set("/default_pg/2//cpu//0/0", "addr-of-1");
  rank5.set("/default_pg/2//cpu//0/1", "addr-of-5");
  EXPECT_EQ(string_of(*rank1.get("/default_pg/2//cpu//0/1")), "addr-of-5");
  EXPECT_EQ(string_of(*rank5.get("/default_pg/2//cpu//0/0")), "addr-of-1");
  EXPECT_THAT(store->errors(), ElementsAre());
}

// prism_torch's objects (docs/torch-backend.md, "Objects"): a virtual
// sender's come from object_answer (ready, failed, unknown, or pending and
// asked again; a failure is also the store's error, an unknown gathered
// object is not); a real sender's are its own
// SETs, seen by on_object and never answered for.
TEST(RendezvousStoreVirtual, ObjectsOfVirtualSendersAreAnsweredRealOnesFlow) {
  StoreOptions o = store_testing::world(64, {0, 33});
  auto asked = std::make_shared<std::pair<std::mutex, std::multiset<std::string>>>();
  auto recorded =
      std::make_shared<std::pair<std::mutex, std::vector<std::pair<std::string, std::string>>>>();
  o.object_answer = [asked](const std::string& key) {
    std::lock_guard lock(asked->first);
    asked->second.insert(key);
    ObjectAnswer a;
    if (key == "prism/object/1/to/33/0") {
      a.state = ObjectAnswer::State::kReady;
      a.bytes = bytes_of("recorded");
    } else if (key == "prism/object/1/to/33/1") {
      a.state = ObjectAnswer::State::kFailed;
      a.error = "the capture of rank 0 recorded none";
    } else if (key == "prism/object/40/all_gather/0:1:64/0") {
      a.state = ObjectAnswer::State::kUnknown;
      a.error = "rank 33's capture runs later";
    } else if (asked->second.count(key) >= 3) {  // pending twice, then there
      a.state = ObjectAnswer::State::kReady;
      a.bytes = bytes_of("late");
    }
    return a;
  };
  o.on_object = [recorded](const std::string& key, const std::vector<std::uint8_t>& value) {
    std::lock_guard lock(recorded->first);
    recorded->second.emplace_back(key, string_of(value));
  };
  auto store = store_testing::start_store(std::move(o));
  TestClient rank33(store->port(), Dialect::kValidated);
  TestClient rank0(store->port(), Dialect::kValidated);

  const std::string prefix = "/default_pg/";
  rank33.send({.op = Op::kWait, .keys = {prefix + "prism/object/1/to/33/0"}});  // as torch's get()
  EXPECT_EQ(rank33.read_u8(), tcpstore::kStopWaiting);
  EXPECT_EQ(string_of(*rank33.get(prefix + "prism/object/1/to/33/0")), "recorded");
  EXPECT_EQ(string_of(*rank33.get(prefix + "prism/object/1/to/33/1")),
            "PRISMERRthe capture of rank 0 recorded none");
  EXPECT_EQ(string_of(*rank33.get(prefix + "prism/object/1/group/0:1:64/0")), "late");
  // A gathered object not known yet: the value says so; no error of the run.
  EXPECT_EQ(string_of(*rank33.get(prefix + "prism/object/40/all_gather/0:1:64/0")),
            "PRISMUNKrank 33's capture runs later");

  rank0.set(prefix + "prism/object/0/to/32/0", "sent");  // a real sender
  EXPECT_EQ(string_of(*rank33.get(prefix + "prism/object/0/to/32/0")), "sent");
  {
    std::lock_guard lock(asked->first);
    EXPECT_EQ(asked->second.count("prism/object/1/group/0:1:64/0"), 3u);
    EXPECT_EQ(asked->second.count("prism/object/0/to/32/0"), 0u);
  }
  std::lock_guard lock(recorded->first);
  EXPECT_THAT(recorded->second, ElementsAre(::testing::Pair("prism/object/0/to/32/0", "sent")));
  // The failure ends the run too.
  EXPECT_THAT(store->errors(), ElementsAre("the capture of rank 0 recorded none"));
}

}  // namespace
}  // namespace prism::runtime
