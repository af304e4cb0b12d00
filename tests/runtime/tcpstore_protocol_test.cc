// The TCPStore codec and the key rules, without sockets.
#include "runtime/tcpstore_protocol.h"

#include <gtest/gtest.h>

#include "runtime/rendezvous_store_keys.h"

namespace prism::runtime {
namespace {

using store_keys::KeyKind;
using tcpstore::Bytes;
using tcpstore::bytes_of;
using tcpstore::Decoded;
using tcpstore::Dialect;
using tcpstore::Op;
using tcpstore::Query;

TEST(TcpStoreProtocol, DetectsTheDialectFromTheFirstQuery) {
  Query validate{.op = Op::kValidate, .word = tcpstore::kValidationMagic};
  EXPECT_EQ(tcpstore::detect(tcpstore::encode(Dialect::kValidated, validate)), Dialect::kValidated);
  Query set{.op = Op::kSet, .keys = {"k"}, .values = {bytes_of("v")}};
  EXPECT_EQ(tcpstore::detect(tcpstore::encode(Dialect::kLegacy, set)), Dialect::kLegacy);
  Query get{.op = Op::kGet, .keys = {"k"}};
  EXPECT_EQ(tcpstore::detect(tcpstore::encode(Dialect::kLegacy, get)), Dialect::kLegacy);
  EXPECT_EQ(tcpstore::detect(Bytes{0, 0xCE}), Dialect::kUnknown);  // too short to tell
  EXPECT_EQ(tcpstore::detect(bytes_of("GET / HTTP/1.1")), Dialect::kLegacy);
}

TEST(TcpStoreProtocol, EveryQueryRoundTripsInBothDialects) {
  const std::vector<Query> queries = {
      {.op = Op::kSet, .keys = {"a"}, .values = {bytes_of("1")}},
      {.op = Op::kCompareSet, .keys = {"a"}, .values = {bytes_of(""), bytes_of("2")}},
      {.op = Op::kGet, .keys = {"a"}},
      {.op = Op::kAdd, .keys = {"n"}, .delta = -7},
      {.op = Op::kCheck, .keys = {"a", "b"}},
      {.op = Op::kWait, .keys = {"a", "b", "c"}},
      {.op = Op::kGetNumKeys},
      {.op = Op::kDeleteKey, .keys = {"a"}},
      {.op = Op::kAppend, .keys = {"a"}, .values = {bytes_of("xy")}},
      {.op = Op::kMultiGet, .keys = {"a", "b"}},
      {.op = Op::kMultiSet, .keys = {"a", "b"}, .values = {bytes_of("1"), bytes_of("")}},
      {.op = Op::kCancelWait},
      {.op = Op::kWatchKey, .keys = {"w"}},
      {.op = Op::kPing, .word = 4242},
      {.op = Op::kQueuePush, .keys = {"q"}, .values = {bytes_of("item")}},
      {.op = Op::kQueuePop, .keys = {"q"}},
      {.op = Op::kQueueLen, .keys = {"q"}},
      {.op = Op::kList},
  };
  for (Dialect d : {Dialect::kLegacy, Dialect::kValidated}) {
    for (const Query& q : queries) {
      if (tcpstore::wire_type(d, q.op) < 0) continue;
      SCOPED_TRACE(std::string(tcpstore::op_name(q.op)) + " in " +
                   std::string(tcpstore::dialect_name(d)));
      Bytes wire = tcpstore::encode(d, q);
      for (std::size_t cut = 0; cut < wire.size(); ++cut) {  // every prefix is short
        auto part = tcpstore::decode(d, std::span(wire.data(), cut), false, {});
        ASSERT_EQ(part.kind, Decoded::Kind::kNeedMore) << cut;
      }
      wire.push_back(99);  // the next query's first byte
      auto got = tcpstore::decode(d, wire, false, {});
      ASSERT_EQ(got.kind, Decoded::Kind::kQuery) << got.error;
      EXPECT_EQ(got.consumed, wire.size() - 1);
      EXPECT_EQ(got.query.op, q.op);
      EXPECT_EQ(got.query.keys, q.keys);
      EXPECT_EQ(got.query.values, q.values);
      EXPECT_EQ(got.query.delta, q.delta);
      EXPECT_EQ(got.query.word, q.word);
    }
  }
}

TEST(TcpStoreProtocol, NumbersQueriesAsTorchDoes) {
  // 1.13's TCPStore.cpp and 2.x's TCPStoreBackend.hpp.
  EXPECT_EQ(tcpstore::wire_type(Dialect::kLegacy, Op::kSet), 0);
  EXPECT_EQ(tcpstore::wire_type(Dialect::kLegacy, Op::kWatchKey), 7);
  EXPECT_EQ(tcpstore::wire_type(Dialect::kLegacy, Op::kDeleteKey), 8);
  EXPECT_EQ(tcpstore::wire_type(Dialect::kLegacy, Op::kPing), -1);
  EXPECT_EQ(tcpstore::wire_type(Dialect::kValidated, Op::kValidate), 0);
  EXPECT_EQ(tcpstore::wire_type(Dialect::kValidated, Op::kGetNumKeys), 7);
  EXPECT_EQ(tcpstore::wire_type(Dialect::kValidated, Op::kCancelWait), 12);
  EXPECT_EQ(tcpstore::wire_type(Dialect::kValidated, Op::kPing), 13);
  EXPECT_EQ(tcpstore::wire_type(Dialect::kValidated, Op::kList), 17);
  EXPECT_EQ(tcpstore::wire_type(Dialect::kValidated, Op::kWatchKey), -1);
}

TEST(TcpStoreProtocol, RejectsWhatNoClientSends) {
  auto unknown = tcpstore::decode(Dialect::kLegacy, bytes_of("GET /"), true, {});
  EXPECT_EQ(unknown.kind, Decoded::Kind::kError);
  EXPECT_EQ(unknown.error, "unknown query type 71 (torch 1.13-2.1 protocol)");

  tcpstore::Limits small{.max_key_bytes = 4};
  Bytes long_key = tcpstore::encode(Dialect::kLegacy, {.op = Op::kGet, .keys = {"abcdef"}});
  auto too_long = tcpstore::decode(Dialect::kLegacy, long_key, false, small);
  EXPECT_EQ(too_long.kind, Decoded::Kind::kError);
  EXPECT_EQ(too_long.error, "GET with a key of 6 bytes (limit 4)");

  Bytes bad_magic = tcpstore::encode(Dialect::kValidated, {.op = Op::kValidate, .word = 1});
  EXPECT_EQ(tcpstore::decode(Dialect::kValidated, bad_magic, true, {}).kind, Decoded::Kind::kError);
  Bytes again = tcpstore::encode(Dialect::kValidated,
                                 {.op = Op::kValidate, .word = tcpstore::kValidationMagic});
  EXPECT_EQ(tcpstore::decode(Dialect::kValidated, again, false, {}).error,
            "VALIDATE after the connection's first query");
}

struct Classified {
  const char* key;
  KeyKind kind;
  const char* group;
  int rank;
};

TEST(RendezvousStoreKeys, ClassifiesTorchsKeys) {
  const Classified cases[] = {
      {"init/", KeyKind::kWorkerCounter, "", -1},
      {"//worker/attempt_0/default_pg/store_based_barrier_key:1", KeyKind::kBarrierCounter, "", -1},
      {"/default_pg/store_based_barrier_key:0:last_worker", KeyKind::kPlain, "", -1},
      // 1.13: <group>/<counter>, Gloo <group>/<device index>/<rank>
      {"//worker/attempt_0/default_pg/0/0", KeyKind::kNcclId, "0", 0},
      {"//worker/attempt_0/default_pg/3/2:5", KeyKind::kNcclP2pId, "3", 2},
      {"//worker/attempt_0/default_pg/0/0/7", KeyKind::kGlooAddress, "0", 7},
      {"//worker/attempt_0/default_pg/0/0/rank_7", KeyKind::kGlooAddress, "0", 7},
      // 2.x: PrefixStore(f"{group}/") and the device
      {"//worker/attempt_0/default_pg/0//cuda//1", KeyKind::kNcclId, "0", 0},
      {"//worker/attempt_0/default_pg/0//cuda//UniqueNCCLID:2", KeyKind::kNcclRootId, "0", 2},
      {"//worker/attempt_0/default_pg/0//cpu//0/3", KeyKind::kGlooAddress, "0", 3},
      {"/default_pg/1//cuda//9:4", KeyKind::kNcclP2pId, "1", 4},
      // 2.11: a new group's store within the default group's (seen on an
      // H200 with Megatron-Core's groups, 2026-11-27)
      {"/default_pg/0//2313//cuda//0", KeyKind::kNcclId, "2313", 0},
      {"/default_pg/0//5//cuda//UniqueNCCLID:1", KeyKind::kNcclRootId, "5", 1},
      {"/default_pg/0//2313//cuda//3:1", KeyKind::kNcclP2pId, "2313", 1},
      {"/default_pg/0//7//cpu//0/3", KeyKind::kGlooAddress, "7", 3},
      {"/default_pg/0//2313//cuda//SEQ_NUM_STORE_KEY", KeyKind::kPlain, "", -1},
      {"/x/prism/group/5", KeyKind::kGroupDeclaration, "5", -1},
      {"/mykey", KeyKind::kPlain, "", -1},
      {"/default_pg/0//cuda//SEQ_NUM_STORE_KEY", KeyKind::kPlain, "", -1},
      {"/default_pg/0/0/1/2", KeyKind::kPlain, "", -1},
  };
  for (const auto& c : cases) {
    auto info = store_keys::classify(c.key);
    EXPECT_EQ(info.kind, c.kind) << c.key;
    EXPECT_EQ(info.group, c.group) << c.key;
    EXPECT_EQ(info.rank, c.rank) << c.key;
  }
  EXPECT_EQ(store_keys::classify("/default_pg/0//cuda//UniqueNCCLID:2").root_prefix,
            "/default_pg/0//cuda//");
  EXPECT_EQ(store_keys::classify("/default_pg/0//5//cuda//UniqueNCCLID:0").root_prefix,
            "/default_pg/0//5//cuda//");
  EXPECT_EQ(store_keys::classify("/p/store_based_barrier_key:abc").barrier_name, "abc");
}

TEST(RendezvousStoreKeys, SynthesizedIdsAreDeterministicPerKey) {
  auto a = store_keys::synthesized_id("/default_pg/0/0");
  EXPECT_EQ(a.size(), store_keys::kNcclUniqueIdBytes);
  EXPECT_EQ(std::string(a.begin(), a.begin() + 8), "prism-id");
  EXPECT_EQ(a, store_keys::synthesized_id("/default_pg/0/0"));
  EXPECT_NE(a, store_keys::synthesized_id("/default_pg/0/1"));
}

// ProcessGroupNCCL's getRootIndex: which root a rank is (or -1).
int get_root_index(int rank, int n_ranks, int n_ids) {
  const int rmr = n_ranks % n_ids;
  const int rpr = n_ranks / n_ids;
  const int rlim = rmr * (rpr + 1);
  if (rank < rlim) return rank % (rpr + 1) ? -1 : rank / (rpr + 1);
  return (rank - rlim) % rpr ? -1 : ((rank - rlim) / rpr) + rmr;
}

TEST(RendezvousStoreKeys, ScalableRootsInvertGetRootIndex) {
  for (int n : {1, 2, 7, 128, 129, 257, 300, 1000}) {
    for (int ids = 1; ids <= std::min(n, 9); ++ids) {
      for (int root = 0; root < ids; ++root) {
        int rank = store_keys::scalable_root_rank(root, ids, n);
        ASSERT_EQ(get_root_index(rank, n, ids), root) << n << " " << ids << " " << root;
      }
    }
  }
}

TEST(RendezvousStoreKeys, ParsesGroupMembers) {
  auto ok = store_keys::parse_members("0, 2,4");
  ASSERT_TRUE(ok.is_ok());
  EXPECT_EQ(*ok, (std::vector<std::int32_t>{0, 2, 4}));
  auto bad = store_keys::parse_members("0,x");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().message(), "item 2 ('x') is not a rank");
}

}  // namespace
}  // namespace prism::runtime
