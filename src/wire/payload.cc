#include "wire/payload.h"

#include <type_traits>
#include <utility>

#include <fmt/format.h>

#include "util/check.h"

namespace prism::wire {
namespace {

// Little-endian writer of one payload.
class Writer {
 public:
  template <typename T>
  void put(T v) {
    static_assert(std::is_integral_v<T>);
    using U = std::make_unsigned_t<T>;
    const U u = static_cast<U>(v);
    for (std::size_t i = 0; i < sizeof(T); ++i) out_.push_back(static_cast<char>(u >> (8 * i)));
  }
  void put_string(std::string_view s) {
    PRISM_CHECK(s.size() <= kMaxString, "wire: string longer than kMaxString");
    put(static_cast<std::uint32_t>(s.size()));
    out_.append(s);
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

// Little-endian reader of one payload; the first failure sticks and names
// the field.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}

  template <typename T>
  T get(const char* field) {
    static_assert(std::is_integral_v<T>);
    if (!need(sizeof(T), field)) return T{};
    using U = std::make_unsigned_t<T>;
    U u = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i)
      u |= static_cast<U>(static_cast<unsigned char>(in_[pos_ + i])) << (8 * i);
    pos_ += sizeof(T);
    return static_cast<T>(u);
  }
  std::string get_string(const char* field) {
    const auto n = get<std::uint32_t>(field);
    if (!error_.empty()) return {};
    if (n > kMaxString) {
      fail(fmt::format("{} is {} bytes long, over {}", field, n, kMaxString));
      return {};
    }
    if (!need(n, field)) return {};
    std::string s(in_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  // An enum whose values are 0..count-1 (or the listed ones, via `valid`).
  template <typename E, typename V>
  E get_enum(const char* field, bool (*valid)(V)) {
    const V v = get<V>(field);
    if (error_.empty() && !valid(v)) fail(fmt::format("{} {} is not a known value", field, v));
    return static_cast<E>(v);
  }
  // A u8 that is 0 or 1.
  bool get_bool(const char* field) {
    const auto v = get<std::uint8_t>(field);
    if (error_.empty() && v > 1) fail(fmt::format("{} {} is neither 0 nor 1", field, v));
    return v == 1;
  }
  bool ok() const { return error_.empty(); }
  void fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
  }
  void non_negative(std::int64_t v, const char* field) {
    if (v < 0) fail(fmt::format("{} {} is negative", field, v));
  }
  // The payload must end exactly here.
  const std::string& finish() {
    if (error_.empty() && pos_ != in_.size())
      fail(fmt::format("{} bytes after the last field", in_.size() - pos_));
    return error_;
  }

 private:
  bool need(std::size_t n, const char* field) {
    if (!error_.empty()) return false;
    if (in_.size() - pos_ >= n) return true;
    fail(fmt::format("payload ends inside {}", field));
    return false;
  }
  std::string_view in_;
  std::size_t pos_ = 0;
  std::string error_;
};

bool valid_op_code(std::uint8_t v) {
  return v < kNumOpCodes;
}
bool valid_dtype(std::uint8_t v) {
  return v <= static_cast<std::uint8_t>(DType::kInt64);
}
bool valid_memory_action(std::uint8_t v) {
  return v <= 1;
}
bool valid_marker(std::uint8_t v) {
  return v <= static_cast<std::uint8_t>(MarkerCode::kPhase);
}
bool valid_error(std::uint32_t v) {
  return v >= 1 && v <= 4;
}

void write(Writer& w, const Hello& m) {
  w.put(m.rank), w.put(m.world_size), w.put(m.local_rank), w.put(m.pid);
  w.put_string(m.program);
  w.put_string(m.secret);
}
void write_members(Writer& w, const std::vector<std::int32_t>& members) {
  PRISM_CHECK(members.size() <= kMaxMembers, "wire: communicator beyond kMaxMembers");
  w.put(static_cast<std::uint32_t>(members.size()));
  for (std::int32_t r : members) w.put(r);
}
void write(Writer& w, const CommInit& m) {
  w.put(m.comm), w.put(m.nranks), w.put(m.rank_in_comm), w.put(m.id_hash);
  write_members(w, m.members);
}
void write(Writer& w, const CommSplit& m) {
  w.put(m.parent), w.put(m.comm), w.put(m.color), w.put(m.key);
}
void write(Writer& w, const CommInfo& m) {
  w.put(m.comm), w.put(m.rank_in_comm);
  write_members(w, m.members);
}
void write(Writer& w, const Op& m) {
  w.put(m.op_id), w.put(m.comm), w.put(m.stream), w.put(static_cast<std::uint8_t>(m.code));
  w.put(static_cast<std::uint8_t>(m.dtype)), w.put(m.bytes), w.put(m.peer), w.put(m.tag);
  w.put(m.group), w.put(m.at);
}
void write(Writer& w, const Memory& m) {
  w.put(static_cast<std::uint8_t>(m.action)), w.put(m.id), w.put(m.bytes), w.put(m.stream);
  w.put(m.at);
}
void write(Writer& w, const Marker& m) {
  w.put(static_cast<std::uint8_t>(m.code)), w.put(m.value), w.put(m.at);
}
void write(Writer& w, const Compute& m) {
  w.put(m.stream), w.put(m.at), w.put(m.duration);
  w.put_string(m.name);
}
void write(Writer& w, const Bye& m) {
  w.put(m.exit_code), w.put(m.at);
}
void write(Writer& w, const Wait& m) {
  w.put(m.wait_id), w.put(m.op_id), w.put(m.answers_seen), w.put(m.at), w.put(m.until);
}
void write(Writer& w, const Horizon& m) {
  w.put(m.wait_id), w.put(m.at), w.put(m.quiet_until);
}
void write(Writer& w, const Welcome& m) {
  w.put(m.rank), w.put(m.world_size), w.put(m.start_at);
  w.put_string(m.job);
  w.put(static_cast<std::uint8_t>(m.capture ? 1 : 0));
}
void write(Writer& w, const Complete& m) {
  w.put(m.op_id), w.put(m.at), w.put(m.nccl_bytes);
}
void write(Writer& w, const Error& m) {
  w.put(static_cast<std::uint32_t>(m.code));
  w.put_string(m.message);
}

Hello read_hello(Reader& r) {
  Hello m;
  m.rank = r.get<std::int32_t>("rank");
  m.world_size = r.get<std::int32_t>("world_size");
  m.local_rank = r.get<std::int32_t>("local_rank");
  m.pid = r.get<std::int64_t>("pid");
  m.program = r.get_string("program");
  m.secret = r.get_string("secret");
  // `else`: world_size - 1 of a world_size of INT32_MIN would overflow.
  if (m.world_size < 1)
    r.fail(fmt::format("world_size {} is not positive", m.world_size));
  else if (m.rank < 0 || m.rank >= m.world_size)
    r.fail(fmt::format("rank {} is outside 0..{}", m.rank, m.world_size - 1));
  r.non_negative(m.local_rank, "local_rank");
  return m;
}

// `n` global ranks, each non-negative; stops at the first failure.
void read_members(Reader& r, std::uint32_t n, std::vector<std::int32_t>* out) {
  for (std::uint32_t i = 0; r.ok() && i < n && i <= kMaxMembers; ++i) {
    const auto member = r.get<std::int32_t>("members");
    r.non_negative(member, "member");
    out->push_back(member);
  }
}

CommInit read_comm_init(Reader& r) {
  CommInit m;
  m.comm = r.get<std::uint32_t>("comm");
  m.nranks = r.get<std::int32_t>("nranks");
  m.rank_in_comm = r.get<std::int32_t>("rank_in_comm");
  m.id_hash = r.get<std::uint64_t>("id_hash");
  const auto n = r.get<std::uint32_t>("members");
  if (m.nranks < 1)
    r.fail(fmt::format("nranks {} is not positive", m.nranks));
  else if (m.rank_in_comm < 0 || m.rank_in_comm >= m.nranks)
    r.fail(fmt::format("rank_in_comm {} is outside 0..{}", m.rank_in_comm, m.nranks - 1));
  if (n != 0 && n != static_cast<std::uint32_t>(m.nranks))
    r.fail(fmt::format("{} members for a communicator of {} ranks", n, m.nranks));
  read_members(r, n, &m.members);
  return m;
}

CommSplit read_comm_split(Reader& r) {
  CommSplit m;
  m.parent = r.get<std::uint32_t>("parent");
  m.comm = r.get<std::uint32_t>("comm");
  m.color = r.get<std::int32_t>("color");
  m.key = r.get<std::int32_t>("key");
  r.non_negative(m.color, "color");
  return m;
}

CommInfo read_comm_info(Reader& r) {
  CommInfo m;
  m.comm = r.get<std::uint32_t>("comm");
  m.rank_in_comm = r.get<std::int32_t>("rank_in_comm");
  const auto n = r.get<std::uint32_t>("members");
  if (r.ok() && (n == 0 || n > kMaxMembers))
    r.fail(fmt::format("{} members, not 1..{}", n, kMaxMembers));
  if (r.ok() && (m.rank_in_comm < 0 || static_cast<std::uint32_t>(m.rank_in_comm) >= n))
    r.fail(fmt::format("rank_in_comm {} is outside 0..{}", m.rank_in_comm, n - 1));
  read_members(r, n, &m.members);
  return m;
}

Op read_op(Reader& r) {
  Op m;
  m.op_id = r.get<std::uint32_t>("op_id");
  m.comm = r.get<std::uint32_t>("comm");
  m.stream = r.get<std::uint16_t>("stream");
  m.code = r.get_enum<OpCode>("op code", valid_op_code);
  m.dtype = r.get_enum<DType>("dtype", valid_dtype);
  m.bytes = r.get<std::int64_t>("bytes");
  m.peer = r.get<std::int32_t>("peer");
  m.tag = r.get<std::int32_t>("tag");
  m.group = r.get<std::uint32_t>("group");
  m.at = r.get<std::int64_t>("at");
  r.non_negative(m.bytes, "bytes");
  r.non_negative(m.peer, "peer");
  r.non_negative(m.at, "at");
  return m;
}

Memory read_memory(Reader& r) {
  Memory m;
  m.action = r.get_enum<MemoryAction>("action", valid_memory_action);
  m.id = r.get<std::uint64_t>("id");
  m.bytes = r.get<std::int64_t>("bytes");
  m.stream = r.get<std::uint16_t>("stream");
  m.at = r.get<std::int64_t>("at");
  r.non_negative(m.bytes, "bytes");
  r.non_negative(m.at, "at");
  return m;
}

Marker read_marker(Reader& r) {
  Marker m;
  m.code = r.get_enum<MarkerCode>("marker", valid_marker);
  m.value = r.get<std::int32_t>("value");
  m.at = r.get<std::int64_t>("at");
  r.non_negative(m.at, "at");
  return m;
}

Compute read_compute(Reader& r) {
  Compute m;
  m.stream = r.get<std::uint16_t>("stream");
  m.at = r.get<std::int64_t>("at");
  m.duration = r.get<std::int64_t>("duration");
  m.name = r.get_string("name");
  r.non_negative(m.at, "at");
  r.non_negative(m.duration, "duration");
  return m;
}

Bye read_bye(Reader& r) {
  Bye m;
  m.exit_code = r.get<std::int32_t>("exit_code");
  m.at = r.get<std::int64_t>("at");
  r.non_negative(m.at, "at");
  return m;
}

Wait read_wait(Reader& r) {
  Wait m;
  m.wait_id = r.get<std::uint32_t>("wait_id");
  m.op_id = r.get<std::uint32_t>("op_id");
  m.answers_seen = r.get<std::uint32_t>("answers_seen");
  m.at = r.get<std::int64_t>("at");
  m.until = r.get<std::int64_t>("until");
  r.non_negative(m.at, "at");
  if (r.ok() && m.until < m.at) r.fail(fmt::format("until {} is before at {}", m.until, m.at));
  return m;
}

Horizon read_horizon(Reader& r) {
  Horizon m;
  m.wait_id = r.get<std::uint32_t>("wait_id");
  m.at = r.get<std::int64_t>("at");
  m.quiet_until = r.get<std::int64_t>("quiet_until");
  r.non_negative(m.at, "at");
  r.non_negative(m.quiet_until, "quiet_until");
  return m;
}

Welcome read_welcome(Reader& r) {
  Welcome m;
  m.rank = r.get<std::int32_t>("rank");
  m.world_size = r.get<std::int32_t>("world_size");
  m.start_at = r.get<std::int64_t>("start_at");
  m.job = r.get_string("job");
  m.capture = r.get_bool("capture");
  r.non_negative(m.start_at, "start_at");
  return m;
}

Complete read_complete(Reader& r) {
  Complete m;
  m.op_id = r.get<std::uint32_t>("op_id");
  m.at = r.get<std::int64_t>("at");
  r.non_negative(m.at, "at");
  m.nccl_bytes = r.get<std::int64_t>("nccl_bytes");
  r.non_negative(m.nccl_bytes, "nccl_bytes");
  return m;
}

Error read_error(Reader& r) {
  Error m;
  m.code = r.get_enum<ErrorCode>("error code", valid_error);
  m.message = r.get_string("message");
  return m;
}

std::optional<Message> read_payload(MessageType t, Reader& r) {
  switch (t) {
    case MessageType::kHello:
      return read_hello(r);
    case MessageType::kCommInit:
      return read_comm_init(r);
    case MessageType::kOp:
      return read_op(r);
    case MessageType::kMemory:
      return read_memory(r);
    case MessageType::kMarker:
      return read_marker(r);
    case MessageType::kCompute:
      return read_compute(r);
    case MessageType::kBye:
      return read_bye(r);
    case MessageType::kWait:
      return read_wait(r);
    case MessageType::kHorizon:
      return read_horizon(r);
    case MessageType::kWelcome:
      return read_welcome(r);
    case MessageType::kComplete:
      return read_complete(r);
    case MessageType::kError:
      return read_error(r);
    case MessageType::kCommSplit:
      return read_comm_split(r);
    case MessageType::kCommInfo:
      return read_comm_info(r);
  }
  return std::nullopt;
}
}  // namespace

std::string encode_payload(const Message& m) {
  Writer w;
  std::visit([&](const auto& v) { write(w, v); }, m);
  return w.take();
}

std::optional<Message> decode_payload(MessageType t, std::string_view payload, std::string* why) {
  Reader r(payload);
  std::optional<Message> m = read_payload(t, r);
  *why = r.finish();
  return m;
}

}  // namespace prism::wire
