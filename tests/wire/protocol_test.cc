// The wire protocol: every message survives encode/decode, frames split at
// any byte boundary decode the same, and each malformed frame is rejected
// with its number, type and field.
#include "wire/protocol.h"

#include <cstdint>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace prism::wire {
namespace {

using ::testing::HasSubstr;

std::vector<Message> every_message() {
  return {
      Hello{3, 8192, 3, 4242, "train.py", "6b1f0c2e"},
      CommInit{7, 4, 2, 0xdeadbeefcafef00dull, {0, 1024, 2048, 3072}},
      CommInit{8, 16, 5, 99, {}},
      Op{12, 7, 2, OpCode::kReduceScatter, DType::kFloat32, 1 << 30, 0, 0, 0, 123'456'789},
      Op{13, 8, 1, OpCode::kSend, DType::kBFloat16, 65536, 5, 17, 4, 200'000'000},
      Memory{MemoryAction::kAlloc, 0x7f0000200000ull, 2 << 20, 0, 10},
      Memory{MemoryAction::kFree, 0x7f0000200000ull, 2 << 20, 1, 20},
      Marker{MarkerCode::kIterationEnd, 4, 6'204'000'000},
      Compute{0, 50, 1'053'860, "attn_bwd"},
      Bye{0, 7'000'000'000},
      Wait{3, 12, 40, 130'000'000, 150'000'000},
      Wait{4, kAnyOp, 41, 150'000'000, kNoLimit},
      Welcome{3, 8192, 0, "llama3-8b-h100-64"},
      Welcome{0, 64, 0, "capture", true},
      Complete{12, 130'000'000, 6 << 20},
      Error{ErrorCode::kMismatch, "rank 3 op 12: the graph has all_gather of 4 MiB here"},
      Horizon{3, 150'000'000, 270'000'000},
      Horizon{4, 150'000'000, kNoLimit},
      CommSplit{7, 9, 2003953581, 3},
      CommInfo{9, 1, {1, 3}},
  };
}

// Equality through a second encoding: each message type's fields all travel.
std::string bytes_of(const Message& m) {
  return encode(m, 0);
}

std::vector<Message> decode_all(FrameDecoder& d) {
  std::vector<Message> out;
  for (;;) {
    Result<std::optional<Message>> r = d.next();
    EXPECT_TRUE(r.is_ok()) << r.status().message();
    if (!r.is_ok() || !r.value()) return out;
    out.push_back(*r.value());
  }
}

TEST(ProtocolTest, EveryMessageRoundTrips) {
  const std::vector<Message> sent = every_message();
  std::string stream;
  for (std::size_t i = 0; i < sent.size(); ++i) stream += encode(sent[i], i);
  FrameDecoder d;
  d.feed(stream);
  const std::vector<Message> got = decode_all(d);
  ASSERT_EQ(got.size(), sent.size());
  for (std::size_t i = 0; i < sent.size(); ++i) {
    EXPECT_EQ(type_of(got[i]), type_of(sent[i])) << i;
    EXPECT_EQ(bytes_of(got[i]), bytes_of(sent[i])) << i;
  }
  EXPECT_EQ(d.frames(), sent.size());
  EXPECT_EQ(d.buffered(), 0u);
  const Op& op = std::get<Op>(got[3]);
  EXPECT_EQ(op.code, OpCode::kReduceScatter);
  EXPECT_EQ(op.bytes, 1 << 30);
  EXPECT_EQ(op.at, 123'456'789);
  EXPECT_EQ(std::get<CommInit>(got[1]).members, (std::vector<std::int32_t>{0, 1024, 2048, 3072}));
  EXPECT_EQ(std::get<CommInit>(got[1]).id_hash, 0xdeadbeefcafef00dull);
}

TEST(ProtocolTest, HeaderLayoutIsFixed) {
  const std::string f = encode(Complete{1, 2}, 5);
  ASSERT_EQ(f.size(), kHeaderSize + 20);
  EXPECT_EQ(f.substr(0, 4), "PRSM");
  EXPECT_EQ(f[4], 4);    // version, little-endian
  EXPECT_EQ(f[6], 65);   // type: complete
  EXPECT_EQ(f[8], 5);    // seq
  EXPECT_EQ(f[12], 20);  // payload length: op_id, at, nccl_bytes
}

TEST(ProtocolTest, FramesSplitAtAnyByteDecodeTheSame) {
  std::string stream;
  const std::vector<Message> sent = every_message();
  for (std::size_t i = 0; i < sent.size(); ++i) stream += encode(sent[i], i);
  for (std::size_t chunk : {1u, 3u, 7u, 16u, 17u, 100u}) {
    FrameDecoder d;
    std::vector<Message> got;
    for (std::size_t at = 0; at < stream.size(); at += chunk) {
      d.feed(std::string_view(stream).substr(at, chunk));
      for (Message& m : decode_all(d)) got.push_back(std::move(m));
    }
    ASSERT_EQ(got.size(), sent.size()) << chunk;
    for (std::size_t i = 0; i < sent.size(); ++i) EXPECT_EQ(bytes_of(got[i]), bytes_of(sent[i]));
  }
}

TEST(ProtocolTest, PartialFrameWaitsForMoreBytes) {
  const std::string f = encode(Bye{3, 4}, 0);
  FrameDecoder d;
  d.feed(f.substr(0, f.size() - 1));
  Result<std::optional<Message>> r = d.next();
  ASSERT_TRUE(r.is_ok());
  EXPECT_FALSE(r.value().has_value());
  EXPECT_EQ(d.buffered(), f.size() - 1);
  d.feed(f.substr(f.size() - 1));
  r = d.next();
  ASSERT_TRUE(r.is_ok() && r.value().has_value());
  EXPECT_EQ(std::get<Bye>(*r.value()).exit_code, 3);
}

std::string rejection(const std::string& bytes) {
  FrameDecoder d;
  d.feed(bytes);
  for (;;) {
    Result<std::optional<Message>> r = d.next();
    if (!r.is_ok()) {
      // The decoder stays failed.
      EXPECT_FALSE(d.next().is_ok());
      return r.status().message();
    }
    if (!r.value()) return "accepted";
  }
}

// A frame with a hand-written header and payload.
std::string frame(std::uint16_t type, std::uint32_t seq, const std::string& payload,
                  std::uint32_t magic = kMagic, std::uint16_t version = kProtocolVersion) {
  std::string h;
  for (int i = 0; i < 4; ++i) h.push_back(static_cast<char>(magic >> (8 * i)));
  h.push_back(static_cast<char>(version)), h.push_back(static_cast<char>(version >> 8));
  h.push_back(static_cast<char>(type)), h.push_back(static_cast<char>(type >> 8));
  for (int i = 0; i < 4; ++i) h.push_back(static_cast<char>(seq >> (8 * i)));
  const auto n = static_cast<std::uint32_t>(payload.size());
  for (int i = 0; i < 4; ++i) h.push_back(static_cast<char>(n >> (8 * i)));
  return h + payload;
}

std::string payload_of(const Message& m) {
  return encode(m, 0).substr(kHeaderSize);
}

TEST(ProtocolTest, RejectsGarbage) {
  EXPECT_EQ(rejection("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
            "frame 0: bad magic 0x20544547 (expected 0x4d535250): not a PrismLLM peer");
}

TEST(ProtocolTest, RejectsAnotherVersion) {
  EXPECT_EQ(rejection(frame(1, 0, payload_of(Hello{0, 1, 0, 1, "x"}), kMagic, 1)),
            "frame 0: protocol version 1, this side speaks 4");
}

TEST(ProtocolTest, RejectsUnknownType) {
  EXPECT_EQ(rejection(frame(10, 0, "")), "frame 0: unknown message type 10");
}

TEST(ProtocolTest, RejectsFramesOutOfOrder) {
  const std::string two = encode(Bye{0, 1}, 0) + encode(Bye{0, 2}, 2);
  EXPECT_EQ(rejection(two), "frame 1 (bye): out of order: seq 2, expected 1");
}

TEST(ProtocolTest, RejectsOversizePayloadBeforeReadingIt) {
  std::string f = frame(3, 0, "");
  f[14] = 0x20;  // length 0x200000 = 2 MiB
  EXPECT_EQ(rejection(f), "frame 0 (op): payload of 2097152 bytes, over 1048576");
}

TEST(ProtocolTest, RejectsShortAndLongPayloads) {
  const std::string op = payload_of(Op{});
  EXPECT_EQ(rejection(frame(3, 0, op.substr(0, op.size() - 3))),
            "frame 0 (op): payload ends inside at");
  EXPECT_EQ(rejection(frame(3, 0, op + "xy")), "frame 0 (op): 2 bytes after the last field");
}

TEST(ProtocolTest, RejectsValuesOutOfRange) {
  struct Case {
    Message m;
    std::string why;
  };
  const std::vector<Case> cases = {
      {Hello{5, 4, 0, 1, "p"}, "frame 0 (hello): rank 5 is outside 0..3"},
      {Hello{0, 0, 0, 1, "p"}, "frame 0 (hello): world_size 0 is not positive"},
      // Found by fuzz/wire_frames: once world_size - 1 overflowed (UBSan).
      {Hello{0, INT32_MIN, 0, 1, "p"}, "frame 0 (hello): world_size -2147483648 is not positive"},
      {Hello{0, 2, -1, 1, "p"}, "frame 0 (hello): local_rank -1 is negative"},
      {CommInit{1, 0, 0, 0, {}}, "frame 0 (comm_init): nranks 0 is not positive"},
      {CommInit{1, INT32_MIN, 0, 0, {}}, "frame 0 (comm_init): nranks -2147483648 is not positive"},
      {CommInit{1, 4, 4, 0, {}}, "frame 0 (comm_init): rank_in_comm 4 is outside 0..3"},
      {CommInit{1, 4, 0, 0, {1, 2}},
       "frame 0 (comm_init): 2 members for a communicator of 4 ranks"},
      {CommInit{1, 2, 0, 0, {1, -2}}, "frame 0 (comm_init): member -2 is negative"},
      {Op{1, 1, 0, OpCode::kAllReduce, DType::kBFloat16, -5, 0, 0, 0, 0},
       "frame 0 (op): bytes -5 is negative"},
      {Op{1, 1, 0, OpCode::kSend, DType::kBFloat16, 5, -1, 0, 0, 0},
       "frame 0 (op): peer -1 is negative"},
      {Op{1, 1, 0, OpCode::kAllReduce, DType::kBFloat16, 5, 0, 0, 0, -1},
       "frame 0 (op): at -1 is negative"},
      {Memory{MemoryAction::kAlloc, 1, -1, 0, 0}, "frame 0 (memory): bytes -1 is negative"},
      {Compute{0, 0, -3, "k"}, "frame 0 (compute): duration -3 is negative"},
      {Wait{1, 2, 0, 50, 40}, "frame 0 (wait): until 40 is before at 50"},
      {Horizon{1, -4}, "frame 0 (horizon): at -4 is negative"},
      {Horizon{1, 4, -1}, "frame 0 (horizon): quiet_until -1 is negative"},
      {CommSplit{1, 2, -1, 0}, "frame 0 (comm_split): color -1 is negative"},
      {CommInfo{2, 2, {4, 5}}, "frame 0 (comm_info): rank_in_comm 2 is outside 0..1"},
      {CommInfo{2, 0, {}}, "frame 0 (comm_info): 0 members, not 1..131072"},
      {CommInfo{2, 0, {4, -5}}, "frame 0 (comm_info): member -5 is negative"},
  };
  for (const Case& c : cases) EXPECT_EQ(rejection(encode(c.m, 0)), c.why);
}

TEST(ProtocolTest, RejectsUnknownEnumValues) {
  std::string op = payload_of(Op{});
  op[10] = 9;  // op code after op_id, comm, stream
  EXPECT_EQ(rejection(frame(3, 0, op)), "frame 0 (op): op code 9 is not a known value");
  op = payload_of(Op{});
  op[11] = 42;  // dtype
  EXPECT_EQ(rejection(frame(3, 0, op)), "frame 0 (op): dtype 42 is not a known value");
  std::string marker = payload_of(Marker{});
  marker[0] = 7;
  EXPECT_EQ(rejection(frame(5, 0, marker)), "frame 0 (marker): marker 7 is not a known value");
  std::string error = payload_of(Error{});
  error[0] = 0;
  EXPECT_EQ(rejection(frame(66, 0, error)), "frame 0 (error): error code 0 is not a known value");
  std::string welcome = payload_of(Welcome{});
  welcome.back() = 2;  // capture, the last field
  EXPECT_EQ(rejection(frame(64, 0, welcome)), "frame 0 (welcome): capture 2 is neither 0 nor 1");
}

TEST(ProtocolTest, RejectsOverlongStrings) {
  std::string hello = payload_of(Hello{0, 1, 0, 1, ""});
  hello[20] = 0x01, hello[21] = 0x20;  // program length 8193
  EXPECT_THAT(rejection(frame(1, 0, hello)), HasSubstr("program is 8193 bytes long, over 4096"));
}

TEST(ProtocolTest, OpCodesFollowCollectiveKinds) {
  EXPECT_EQ(collective_of(OpCode::kAllGather), CollectiveKind::kAllGather);
  EXPECT_EQ(collective_of(OpCode::kBarrier), CollectiveKind::kBarrier);
  EXPECT_EQ(collective_of(OpCode::kSend), std::nullopt);
  EXPECT_EQ(op_code(CollectiveKind::kAllToAll), OpCode::kAllToAll);
  EXPECT_EQ(to_string(OpCode::kRecv), "recv");
  EXPECT_EQ(to_string(MessageType::kCommInit), "comm_init");
  EXPECT_EQ(to_string(MessageType::kCommSplit), "comm_split");
  EXPECT_EQ(to_string(MessageType::kCommInfo), "comm_info");
}

}  // namespace
}  // namespace prism::wire
