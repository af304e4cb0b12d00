#include "runtime/tcpstore_protocol.h"

#include <array>
#include <cstring>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "util/enum_names.h"

namespace prism::runtime::tcpstore {
namespace {

// Query types in wire order (TCPStore.cpp of 1.13 / TCPStoreBackend.hpp of 2.x).
constexpr std::array kLegacyTypes = {
    Op::kSet,      Op::kCompareSet, Op::kGet,       Op::kAdd,       Op::kCheck,
    Op::kWait,     Op::kGetNumKeys, Op::kWatchKey,  Op::kDeleteKey, Op::kAppend,
    Op::kMultiGet, Op::kMultiSet,   Op::kCancelWait};
constexpr std::array kValidatedTypes = {
    Op::kValidate,   Op::kSet,        Op::kCompareSet, Op::kGet,      Op::kAdd,      Op::kCheck,
    Op::kWait,       Op::kGetNumKeys, Op::kDeleteKey,  Op::kAppend,   Op::kMultiGet, Op::kMultiSet,
    Op::kCancelWait, Op::kPing,       Op::kQueuePush,  Op::kQueuePop, Op::kQueueLen, Op::kList};

constexpr std::array<std::pair<Op, std::string_view>, 19> kOpNames{{
    {Op::kValidate, "VALIDATE"},
    {Op::kSet, "SET"},
    {Op::kCompareSet, "COMPARE_SET"},
    {Op::kGet, "GET"},
    {Op::kAdd, "ADD"},
    {Op::kCheck, "CHECK"},
    {Op::kWait, "WAIT"},
    {Op::kGetNumKeys, "GETNUMKEYS"},
    {Op::kWatchKey, "WATCH_KEY"},
    {Op::kDeleteKey, "DELETE_KEY"},
    {Op::kAppend, "APPEND"},
    {Op::kMultiGet, "MULTI_GET"},
    {Op::kMultiSet, "MULTI_SET"},
    {Op::kCancelWait, "CANCEL_WAIT"},
    {Op::kPing, "PING"},
    {Op::kQueuePush, "QUEUE_PUSH"},
    {Op::kQueuePop, "QUEUE_POP"},
    {Op::kQueueLen, "QUEUE_LEN"},
    {Op::kList, "LIST"},
}};
constexpr std::array<std::pair<Dialect, std::string_view>, 3> kDialectNames{{
    {Dialect::kUnknown, "unknown protocol"},
    {Dialect::kLegacy, "torch 1.13-2.1 protocol"},
    {Dialect::kValidated, "torch 2.2+ protocol"},
}};

std::span<const Op> types_of(Dialect d) {
  if (d == Dialect::kLegacy) return kLegacyTypes;
  if (d == Dialect::kValidated) return kValidatedTypes;
  return {};
}

// Reads little-endian fields off the front of a span; a read past the end
// leaves `short_` set instead of failing, so "need more bytes" is one check.
class Reader {
 public:
  explicit Reader(std::span<const std::uint8_t> d) : d_(d) {}
  bool short_read() const { return short_; }
  std::size_t pos() const { return pos_; }

  template <typename T>
  T value() {
    T v{};
    if (pos_ + sizeof(T) > d_.size()) {
      short_ = true;
      return v;
    }
    std::memcpy(&v, d_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  // A uint64 length and that many bytes; nullopt when the length is over
  // `limit` (an error) or the bytes are not all there (short_read()).
  std::optional<std::span<const std::uint8_t>> sized(std::uint64_t limit, std::uint64_t* len) {
    *len = value<std::uint64_t>();
    if (short_ || *len > limit) return std::nullopt;
    if (pos_ + *len > d_.size()) {
      short_ = true;
      return std::nullopt;
    }
    auto s = d_.subspan(pos_, *len);
    pos_ += *len;
    return s;
  }

 private:
  std::span<const std::uint8_t> d_;
  std::size_t pos_ = 0;
  bool short_ = false;
};

struct Parse {
  Reader r;
  const Limits& lim;
  Query q;
  std::string error;

  // A length-prefixed field of at most `limit` bytes; nullopt when short or
  // over the limit (then `error` names the field as `what`).
  std::optional<std::span<const std::uint8_t>> field(std::uint64_t limit, std::string_view what) {
    std::uint64_t len = 0;
    auto s = r.sized(limit, &len);
    if (!s && !r.short_read()) {
      error = fmt::format("a {} of {} bytes (limit {})", what, len, limit);
    }
    return s;
  }
  bool key() {
    auto s = field(lim.max_key_bytes, "key");
    if (s) q.keys.emplace_back(reinterpret_cast<const char*>(s->data()), s->size());
    return s.has_value();
  }
  bool value() {
    auto s = field(lim.max_value_bytes, "value");
    if (s) q.values.emplace_back(s->begin(), s->end());
    return s.has_value();
  }
  bool count(std::uint64_t* n) {
    *n = r.value<std::uint64_t>();
    if (r.short_read()) return false;
    if (*n > lim.max_keys) {
      error = fmt::format("{} keys (limit {})", *n, lim.max_keys);
      return false;
    }
    return true;
  }
  bool keys(bool with_values) {
    std::uint64_t n = 0;
    if (!count(&n)) return false;
    for (std::uint64_t i = 0; i < n; ++i) {
      if (!key() || (with_values && !value())) return false;
    }
    return true;
  }

  // Reads the arguments of q.op; false when short or malformed.
  bool arguments() {
    switch (q.op) {
      case Op::kValidate:
      case Op::kPing:
        q.word = r.value<std::uint32_t>();
        return !r.short_read();
      case Op::kSet:
      case Op::kAppend:
      case Op::kQueuePush:
        return key() && value();
      case Op::kCompareSet:
        return key() && value() && value();
      case Op::kAdd:
        if (!key()) return false;
        q.delta = r.value<std::int64_t>();
        return !r.short_read();
      case Op::kGet:
      case Op::kWatchKey:
      case Op::kDeleteKey:
      case Op::kQueuePop:
      case Op::kQueueLen:
        return key();
      case Op::kCheck:
      case Op::kWait:
      case Op::kMultiGet:
        return keys(/*with_values=*/false);
      case Op::kMultiSet:
        return keys(/*with_values=*/true);
      case Op::kGetNumKeys:
      case Op::kCancelWait:
      case Op::kList:
        return true;
    }
    return false;
  }
};

template <typename T>
void put_raw(Bytes& out, T v) {
  const std::size_t at = out.size();
  out.resize(at + sizeof v);
  std::memcpy(out.data() + at, &v, sizeof v);
}

}  // namespace

std::string_view op_name(Op op) {
  return internal::enum_name(op, kOpNames);
}

std::string_view dialect_name(Dialect d) {
  return internal::enum_name(d, kDialectNames);
}

Dialect detect(std::span<const std::uint8_t> data) {
  if (data.empty()) return Dialect::kUnknown;
  // A legacy client's first byte is a query type; only SET is 0, and a SET
  // whose key length starts with the magic's bytes would be a 1 GB key.
  if (data[0] != 0) return Dialect::kLegacy;
  if (data.size() < 5) return Dialect::kUnknown;
  std::uint32_t magic = 0;
  std::memcpy(&magic, data.data() + 1, sizeof magic);
  return magic == kValidationMagic ? Dialect::kValidated : Dialect::kLegacy;
}

int wire_type(Dialect dialect, Op op) {
  auto types = types_of(dialect);
  for (std::size_t i = 0; i < types.size(); ++i) {
    if (types[i] == op) return static_cast<int>(i);
  }
  return -1;
}

Decoded decode(Dialect dialect, std::span<const std::uint8_t> data, bool first,
               const Limits& limits) {
  Decoded out;
  if (data.empty()) return out;
  auto types = types_of(dialect);
  const std::uint8_t type = data[0];
  if (type >= types.size()) {
    out.kind = Decoded::Kind::kError;
    out.error = fmt::format("unknown query type {} ({})", type, dialect_name(dialect));
    return out;
  }
  Parse p{Reader(data.subspan(1)), limits, Query{}, {}};
  p.q.op = types[type];
  if (p.q.op == Op::kValidate && !first) {
    out.kind = Decoded::Kind::kError;
    out.error = "VALIDATE after the connection's first query";
    return out;
  }
  if (!p.arguments()) {
    if (!p.error.empty()) {
      out.kind = Decoded::Kind::kError;
      out.error = fmt::format("{} with {}", op_name(p.q.op), p.error);
    }
    return out;  // kNeedMore
  }
  if (p.q.op == Op::kValidate && p.q.word != kValidationMagic) {
    out.kind = Decoded::Kind::kError;
    out.error =
        fmt::format("VALIDATE with magic {:#010x} (expected {:#010x})", p.q.word, kValidationMagic);
    return out;
  }
  out.kind = Decoded::Kind::kQuery;
  out.consumed = 1 + p.r.pos();
  out.query = std::move(p.q);
  return out;
}

void put_u8(Bytes& out, std::uint8_t v) {
  out.push_back(v);
}

void put_u32(Bytes& out, std::uint32_t v) {
  put_raw(out, v);
}
void put_u64(Bytes& out, std::uint64_t v) {
  put_raw(out, v);
}
void put_i64(Bytes& out, std::int64_t v) {
  put_raw(out, v);
}

void put_bytes(Bytes& out, std::span<const std::uint8_t> v) {
  put_u64(out, v.size());
  out.insert(out.end(), v.begin(), v.end());
}

void put_string(Bytes& out, std::string_view v) {
  put_u64(out, v.size());
  out.insert(out.end(), v.begin(), v.end());
}

Bytes encode(Dialect dialect, const Query& q) {
  Bytes out;
  const int type = wire_type(dialect, q.op);
  if (type < 0) return out;
  put_u8(out, static_cast<std::uint8_t>(type));
  switch (q.op) {
    case Op::kValidate:
    case Op::kPing:
      put_u32(out, q.word);
      break;
    case Op::kAdd:
      put_string(out, q.keys.at(0));
      put_i64(out, q.delta);
      break;
    case Op::kCheck:
    case Op::kWait:
    case Op::kMultiGet:
    case Op::kMultiSet:
      put_u64(out, q.keys.size());
      for (std::size_t i = 0; i < q.keys.size(); ++i) {
        put_string(out, q.keys[i]);
        if (q.op == Op::kMultiSet) put_bytes(out, q.values.at(i));
      }
      break;
    default:
      for (const auto& k : q.keys) put_string(out, k);
      for (const auto& v : q.values) put_bytes(out, v);
      break;
  }
  return out;
}

}  // namespace prism::runtime::tcpstore
