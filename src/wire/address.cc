#include "wire/address.h"

#include <charconv>

#include <fmt/format.h>

namespace prism::wire {

namespace {
constexpr std::size_t kMaxUnixPath = 107;  // sockaddr_un.sun_path less the terminator
}

std::string Address::to_string() const {
  if (kind == Kind::kUnix) return "unix:" + path;
  if (kind == Kind::kInProcess) return "inproc:" + path;
  if (host.find(':') != std::string::npos) return fmt::format("tcp:[{}]:{}", host, port);
  return fmt::format("tcp:{}:{}", host, port);
}

Result<Address> parse_address(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return Status::invalid_argument(
        fmt::format("address '{}': {} (expected unix:PATH or tcp:HOST:PORT)", text, why));
  };
  Address a;
  if (text.starts_with("unix:")) {
    a.path = std::string(text.substr(5));
    if (a.path.empty()) return bad("empty socket path");
    if (a.path.size() > kMaxUnixPath)
      return bad(fmt::format("socket path of {} bytes, over {}", a.path.size(), kMaxUnixPath));
    return a;
  }
  if (!text.starts_with("tcp:")) return bad("unknown scheme");
  a.kind = Address::Kind::kTcp;
  std::string_view rest = text.substr(4);
  std::string_view port;
  if (rest.starts_with("[")) {
    const std::size_t close = rest.find(']');
    if (close == std::string_view::npos) return bad("'[' without ']'");
    a.host = std::string(rest.substr(1, close - 1));
    if (rest.substr(close + 1, 1) != ":") return bad("no :PORT after the host");
    port = rest.substr(close + 2);
  } else {
    const std::size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos) return bad("no :PORT");
    a.host = std::string(rest.substr(0, colon));
    if (a.host.find(':') != std::string::npos) return bad("an IPv6 host goes in brackets");
    port = rest.substr(colon + 1);
  }
  if (a.host.empty()) return bad("empty host");
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value > 65535)
    return bad(fmt::format("port '{}' is not a number in 0..65535", port));
  a.port = static_cast<std::uint16_t>(value);
  return a;
}

bool is_loopback(const Address& a) {
  if (a.kind != Address::Kind::kTcp) return true;
  return a.host == "localhost" || a.host == "::1" || a.host.starts_with("127.");
}

}  // namespace prism::wire
