// The wire protocol of torch.distributed's TCPStore, as the rendezvous store
// speaks it (docs/rendezvous.md has the byte formats and their sources).
//
// A client sends queries: one byte of query type, then the arguments. A
// string or a byte vector is a uint64 length and the bytes; integers are the
// client's host byte order (little-endian on every platform torch ships for).
// Two numberings of the query type exist:
// - kLegacy: torch 1.13 up to 2.1. SET is 0; no handshake.
// - kValidated: torch 2.2 and later. Every connection opens with VALIDATE
//   (type 0 and the uint32 magic 0x3C85F7CE), which shifts every other type
//   by one; PING, queues and LIST were added later.
// Which one a connection speaks is known from its first 5 bytes (detect()).
//
// This file only decodes and encodes; it holds no state and does no I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace prism::runtime::tcpstore {

using Bytes = std::vector<std::uint8_t>;

// A string's bytes, as a value is sent.
inline Bytes bytes_of(std::string_view s) {
  return Bytes(s.begin(), s.end());
}

inline constexpr std::uint32_t kValidationMagic = 0x3C85F7CE;

enum class Dialect : std::uint8_t {
  kUnknown,    // not enough bytes yet to tell
  kLegacy,     // torch 1.13 - 2.1
  kValidated,  // torch 2.2+
};

// The queries of both dialects, named once. kWatchKey exists only in kLegacy;
// kValidate, kPing, the queues and kList only in kValidated.
enum class Op : std::uint8_t {
  kValidate,
  kSet,
  kCompareSet,
  kGet,
  kAdd,
  kCheck,
  kWait,
  kGetNumKeys,
  kWatchKey,
  kDeleteKey,
  kAppend,
  kMultiGet,
  kMultiSet,
  kCancelWait,
  kPing,
  kQueuePush,
  kQueuePop,
  kQueueLen,
  kList,
};

// "SET", "MULTI_GET": torch's own names.
std::string_view op_name(Op op);
std::string_view dialect_name(Dialect d);

// Answers (one byte each).
inline constexpr std::uint8_t kCheckReady = 0;
inline constexpr std::uint8_t kCheckNotReady = 1;
inline constexpr std::uint8_t kStopWaiting = 0;
inline constexpr std::uint8_t kWaitCanceled = 1;
// kLegacy's WATCH_KEY notifications.
inline constexpr std::uint8_t kKeyUpdated = 0;
inline constexpr std::uint8_t kKeyCreated = 1;
inline constexpr std::uint8_t kKeyDeleted = 2;
inline constexpr std::uint8_t kKeyCallbackRegistered = 3;
inline constexpr std::uint8_t kKeyAppended = 4;

// Bounds on what one query may carry. A real client stays far below them;
// past them the bytes are not a TCPStore client's.
struct Limits {
  std::uint64_t max_key_bytes = 64 * 1024;
  std::uint64_t max_value_bytes = 64ull * 1024 * 1024;
  std::uint64_t max_keys = 128 * 1024;
};

struct Query {
  Op op = Op::kGet;
  std::vector<std::string> keys{};  // the key, or the keys of CHECK/WAIT/MULTI_*
  // SET/APPEND/QUEUE_PUSH: {value}; COMPARE_SET: {expected, desired};
  // MULTI_SET: one per key.
  std::vector<Bytes> values{};
  std::int64_t delta = 0;  // ADD
  std::uint32_t word = 0;  // VALIDATE's magic, PING's nonce
};

// What decode() found at the front of the bytes.
struct Decoded {
  enum class Kind { kNeedMore, kQuery, kError };
  Kind kind = Kind::kNeedMore;
  std::size_t consumed = 0;  // kQuery: the query's length in bytes
  Query query;
  std::string error;  // kError: what is wrong ("unknown query type 42")
};

// The dialect of a connection from the first bytes it sent.
Dialect detect(std::span<const std::uint8_t> data);

// Decodes the query at the front of `data`. `first` is true for the
// connection's first query (the only place VALIDATE is allowed).
Decoded decode(Dialect dialect, std::span<const std::uint8_t> data, bool first,
               const Limits& limits);

// Encoders, for answers (and for clients in tests).
void put_u8(Bytes& out, std::uint8_t v);
void put_u32(Bytes& out, std::uint32_t v);
void put_u64(Bytes& out, std::uint64_t v);
void put_i64(Bytes& out, std::int64_t v);
void put_bytes(Bytes& out, std::span<const std::uint8_t> v);  // uint64 length + bytes
void put_string(Bytes& out, std::string_view v);

// The query type byte of `op` in `dialect`; -1 when the dialect lacks it.
int wire_type(Dialect dialect, Op op);

// Encodes a query the way torch's client does (for tests and tools).
Bytes encode(Dialect dialect, const Query& q);

}  // namespace prism::runtime::tcpstore
