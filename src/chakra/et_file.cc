#include "chakra/et_file.h"

#include <charconv>
#include <cstdint>

#include <fmt/format.h>
#include <google/protobuf/stubs/logging.h>

namespace prism::chakra {
namespace {

constexpr int kMaxVarintBytes = 5;

void append_varint32(std::uint32_t v, std::string* out) {
  while (v > 0x7f) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// Why the length prefix at `pos` is bad, or nullptr; `*len` gets the length
// and `*pos` moves past the prefix.
const char* read_varint32(std::string_view bytes, std::size_t* pos, std::uint32_t* len) {
  std::uint64_t v = 0;
  for (int i = 0; i < kMaxVarintBytes; ++i) {
    if (*pos >= bytes.size()) return "the file ends inside a length prefix";
    const auto b = static_cast<unsigned char>(bytes[(*pos)++]);
    v |= static_cast<std::uint64_t>(b & 0x7f) << (7 * i);
    if ((b & 0x80) == 0) {
      if (v > UINT32_MAX) break;
      *len = static_cast<std::uint32_t>(v);
      return nullptr;
    }
  }
  return "bad length prefix (not a varint32)";
}

// The message at `*pos`, moving past it; `where()` starts error messages
// (formatted only for an error).
template <typename Where>
Result<std::string_view> next_message(std::string_view bytes, std::size_t* pos, Where where) {
  std::uint32_t n = 0;
  if (const char* bad = read_varint32(bytes, pos, &n))
    return Status::invalid_argument(fmt::format("{}: {}", where(), bad));
  if (n > bytes.size() - *pos) {
    return Status::invalid_argument(
        fmt::format("{}: truncated message: its prefix says {} bytes, the file has {} left",
                    where(), n, bytes.size() - *pos));
  }
  const std::string_view out = bytes.substr(*pos, n);
  *pos += n;
  return out;
}

// How many messages follow `pos` (a malformed tail counts as one: decoding
// proper names the problem).
std::size_t count_messages(std::string_view bytes, std::size_t pos) {
  std::size_t count = 0;
  while (pos < bytes.size()) {
    std::uint32_t n = 0;
    ++count;
    if (read_varint32(bytes, &pos, &n) != nullptr || n > bytes.size() - pos) break;
    pos += n;
  }
  return count;
}

// protobuf says why a message does not parse (a string field with invalid
// UTF-8) in a log line of its own on stderr; this handler keeps the reason
// instead, for the one error line (docs/chakra.md, "Import").
thread_local std::string protobuf_said;

void keep_what_protobuf_says(google::protobuf::LogLevel, const char*, int,
                             const std::string& message) {
  protobuf_said = message;
}

void quiet_protobuf() {
  static const bool once = (google::protobuf::SetLogHandler(&keep_what_protobuf_says), true);
  (void)once;
  protobuf_said.clear();
}

// ": field ChakraProtoMsg.Node.name holds invalid UTF-8", or nothing.
std::string why_it_does_not_parse() {
  constexpr std::string_view kField = "String field '";
  const std::size_t at = protobuf_said.find(kField);
  if (at == std::string::npos || protobuf_said.find("invalid UTF-8") == std::string::npos)
    return {};
  const std::size_t from = at + kField.size();
  const std::size_t to = protobuf_said.find('\'', from);
  if (to == std::string::npos || to - from > 100) return ": a string field holds invalid UTF-8";
  return fmt::format(": field {} holds invalid UTF-8", protobuf_said.substr(from, to - from));
}

}  // namespace

std::string trace_file_name(std::string_view prefix, long long rank) {
  return fmt::format("{}.{}.et", prefix, rank);
}

std::string comm_groups_file_name(std::string_view prefix) {
  return fmt::format("{}.comm_groups.json", prefix);
}

bool split_trace_file_name(const std::string& name, std::string* prefix, long long* rank) {
  if (!name.ends_with(".et")) return false;
  const std::size_t dot = name.rfind('.', name.size() - 4);
  if (dot == std::string::npos || dot == 0) return false;
  const char* first = name.data() + dot + 1;
  const char* last = name.data() + name.size() - 3;
  const auto [end, ec] = std::from_chars(first, last, *rank);
  if (ec != std::errc() || end != last || first == last) return false;
  *prefix = name.substr(0, dot);
  return true;
}

void append_delimited(const google::protobuf::MessageLite& msg, std::string* out) {
  const std::size_t n = msg.ByteSizeLong();
  append_varint32(static_cast<std::uint32_t>(n), out);
  const std::size_t at = out->size();
  out->resize(at + n);
  msg.SerializeWithCachedSizesToArray(reinterpret_cast<std::uint8_t*>(out->data() + at));
}

Result<EtFile> decode_et(std::string_view bytes, const std::string& source) {
  using ChakraProtoMsg::GlobalMetadata;
  using ChakraProtoMsg::Node;
  using google::protobuf::Arena;
  if (bytes.empty()) {
    return Status::invalid_argument(
        fmt::format("{}: empty file (a trace starts with a GlobalMetadata)", source));
  }
  quiet_protobuf();
  EtFile out;
  out.arena = std::make_unique<Arena>();
  std::size_t pos = 0;
  auto at_start = [&] { return fmt::format("{}: byte 0", source); };
  PRISM_ASSIGN_OR_RETURN(const std::string_view meta, next_message(bytes, &pos, at_start));
  auto* metadata = Arena::CreateMessage<GlobalMetadata>(out.arena.get());
  if (!metadata->ParseFromArray(meta.data(), static_cast<int>(meta.size())))
    return Status::invalid_argument(fmt::format("{}: the GlobalMetadata does not parse{}",
                                                at_start(), why_it_does_not_parse()));
  out.metadata = metadata;
  out.nodes.reserve(count_messages(bytes, pos));
  while (pos < bytes.size()) {
    const std::size_t at = pos;
    auto where = [&] {
      return fmt::format("{}: byte {} (node message {})", source, at, out.nodes.size());
    };
    PRISM_ASSIGN_OR_RETURN(const std::string_view msg, next_message(bytes, &pos, where));
    auto* node = Arena::CreateMessage<Node>(out.arena.get());
    if (!node->ParseFromArray(msg.data(), static_cast<int>(msg.size())))
      return Status::invalid_argument(
          fmt::format("{}: the Node does not parse{}", where(), why_it_does_not_parse()));
    out.nodes.push_back(node);
  }
  return out;
}

}  // namespace prism::chakra
