#include "wire/protocol.h"

#include <array>
#include <utility>

#include <fmt/format.h>

#include "util/check.h"
#include "util/enum_names.h"
#include "wire/payload.h"

namespace prism::wire {
namespace {

constexpr std::array<std::pair<OpCode, std::string_view>, kNumOpCodes> kOpCodeNames{{
    {OpCode::kAllReduce, "all_reduce"},
    {OpCode::kAllGather, "all_gather"},
    {OpCode::kReduceScatter, "reduce_scatter"},
    {OpCode::kBroadcast, "broadcast"},
    {OpCode::kReduce, "reduce"},
    {OpCode::kAllToAll, "all_to_all"},
    {OpCode::kBarrier, "barrier"},
    {OpCode::kSend, "send"},
    {OpCode::kRecv, "recv"},
}};

constexpr std::array<std::pair<MessageType, std::string_view>, 14> kTypeNames{{
    {MessageType::kHello, "hello"},
    {MessageType::kCommInit, "comm_init"},
    {MessageType::kOp, "op"},
    {MessageType::kMemory, "memory"},
    {MessageType::kMarker, "marker"},
    {MessageType::kCompute, "compute"},
    {MessageType::kBye, "bye"},
    {MessageType::kWait, "wait"},
    {MessageType::kWelcome, "welcome"},
    {MessageType::kComplete, "complete"},
    {MessageType::kError, "error"},
    {MessageType::kHorizon, "horizon"},
    {MessageType::kCommSplit, "comm_split"},
    {MessageType::kCommInfo, "comm_info"},
}};

template <typename T>
void store_le(std::string* out, T v) {
  for (std::size_t i = 0; i < sizeof(T); ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

std::uint32_t load_u32(const char* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= static_cast<std::uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}
std::uint16_t load_u16(const char* p) {
  return static_cast<std::uint16_t>(static_cast<unsigned char>(p[0]) |
                                    (static_cast<unsigned char>(p[1]) << 8));
}

}  // namespace

std::string_view to_string(OpCode c) {
  return internal::enum_name(c, kOpCodeNames);
}
std::string_view to_string(MessageType t) {
  return internal::enum_name(t, kTypeNames);
}

std::optional<CollectiveKind> collective_of(OpCode c) {
  if (c == OpCode::kSend || c == OpCode::kRecv) return std::nullopt;
  return static_cast<CollectiveKind>(c);  // the first seven codes follow CollectiveKind
}

OpCode op_code(CollectiveKind k) {
  return static_cast<OpCode>(k);
}

static_assert(static_cast<int>(OpCode::kBarrier) == static_cast<int>(CollectiveKind::kBarrier));
static_assert(static_cast<int>(OpCode::kAllToAll) == static_cast<int>(CollectiveKind::kAllToAll));

MessageType type_of(const Message& m) {
  static constexpr std::array<MessageType, std::variant_size_v<Message>> kTypes{
      MessageType::kHello,     MessageType::kCommInit, MessageType::kOp,    MessageType::kMemory,
      MessageType::kMarker,    MessageType::kCompute,  MessageType::kBye,   MessageType::kWait,
      MessageType::kWelcome,   MessageType::kComplete, MessageType::kError, MessageType::kHorizon,
      MessageType::kCommSplit, MessageType::kCommInfo};
  return kTypes[m.index()];
}

std::string encode(const Message& m, std::uint32_t seq) {
  const std::string body = encode_payload(m);
  PRISM_CHECK(body.size() <= kMaxPayload, "wire: payload over kMaxPayload");
  std::string frame;
  frame.reserve(kHeaderSize + body.size());
  store_le(&frame, kMagic);
  store_le(&frame, kProtocolVersion);
  store_le(&frame, static_cast<std::uint16_t>(type_of(m)));
  store_le(&frame, seq);
  store_le(&frame, static_cast<std::uint32_t>(body.size()));
  return frame + body;
}

void FrameDecoder::feed(std::string_view bytes) {
  // Drop the decoded frames first: what is left is at most a partial frame,
  // so a long connection whose reads split frames does not grow the buffer.
  buf_.erase(0, pos_);
  pos_ = 0;
  buf_.append(bytes);
}

Result<std::optional<Message>> FrameDecoder::next() {
  if (!failed_.is_ok()) return failed_;
  if (buffered() < kHeaderSize) return std::optional<Message>();
  const char* h = buf_.data() + pos_;
  const std::uint32_t magic = load_u32(h);
  const std::uint16_t version = load_u16(h + 4);
  const std::uint16_t type = load_u16(h + 6);
  const std::uint32_t seq = load_u32(h + 8);
  const std::uint32_t length = load_u32(h + 12);
  // Until magic and version are known good, the type means nothing.
  std::string where = fmt::format("frame {}", seq_);
  auto fail = [&](std::string why) {
    failed_ = Status::invalid_argument(fmt::format("{}: {}", where, why));
    return failed_;
  };
  if (magic != kMagic)
    return fail(
        fmt::format("bad magic 0x{:08x} (expected 0x{:08x}): not a PrismLLM peer", magic, kMagic));
  if (version != kProtocolVersion)
    return fail(fmt::format("protocol version {}, this side speaks {}", version, kProtocolVersion));
  const std::string_view name = to_string(static_cast<MessageType>(type));
  if (name == "?") return fail(fmt::format("unknown message type {}", type));
  where += fmt::format(" ({})", name);
  if (seq != seq_) return fail(fmt::format("out of order: seq {}, expected {}", seq, seq_));
  if (length > kMaxPayload)
    return fail(fmt::format("payload of {} bytes, over {}", length, kMaxPayload));
  if (buffered() < kHeaderSize + length) return std::optional<Message>();
  std::string why;
  std::optional<Message> m =
      decode_payload(static_cast<MessageType>(type),
                     std::string_view(buf_).substr(pos_ + kHeaderSize, length), &why);
  if (!why.empty()) return fail(why);
  pos_ += kHeaderSize + length;
  ++seq_;
  return m;
}

}  // namespace prism::wire
