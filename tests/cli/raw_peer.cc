// raw_peer: writes raw bytes to a run's coordinator or rendezvous store, for
// the fault tests of `prism emulate` (emulate_faults_test.cc). It reads the
// run's environment as a real rank gets it: PRISM_COORDINATOR (unix:PATH or tcp:IPV4:PORT),
// PRISM_SECRET, RANK, WORLD_SIZE, MASTER_PORT.
//
//   raw_peer rank garbage|truncated|absurd-length
//       be the real rank: say hello (with the secret), read the welcome,
//       then send one bad frame (bytes that are not a frame; a frame cut
//       off by the close; a header announcing 4 GiB) and read until the
//       coordinator hangs up
//   raw_peer stranger
//       send garbage without a hello and read until the coordinator hangs up
//   raw_peer twice
//       say hello as $RANK a second time (run beside the connected rank, by
//       rank_player --after-connect) and print the coordinator's answer;
//       exits 0 when it is a refusal
//   raw_peer store-hammer N
//       open N connections to 127.0.0.1:$MASTER_PORT at once, send each a
//       malformed or absurd TCPStore query (cycling through kinds) and end
//       its stream, and read each until the store hangs up or 10 s pass;
//       prints how many it closed
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "wire/protocol.h"

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "raw_peer: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(3);
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

int connect_tcp(const std::string& ipv4, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::inet_pton(AF_INET, ipv4.c_str(), &sa.sin_addr) != 1) die("not an IPv4 address: " + ipv4);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) die("connect " + ipv4);
  return fd;
}

// PRISM_COORDINATOR: unix:PATH, or tcp:IPV4:PORT.
int connect_coordinator() {
  const std::string address = env("PRISM_COORDINATOR");
  if (address.rfind("tcp:", 0) == 0) {
    const std::size_t colon = address.rfind(':');
    return connect_tcp(address.substr(4, colon - 4), std::atoi(address.c_str() + colon + 1));
  }
  if (address.rfind("unix:", 0) != 0) die("PRISM_COORDINATOR is neither unix: nor tcp:");
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", address.c_str() + 5);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) die("connect " + address);
  return fd;
}

void write_all(int fd, const std::string& bytes) {
  for (std::size_t at = 0; at < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + at, bytes.size() - at);
    if (n < 0) die("write");
    at += static_cast<std::size_t>(n);
  }
}

// Reads frames until one whole message or the end; nullopt at the end.
std::optional<prism::wire::Message> read_message(int fd, prism::wire::FrameDecoder& d) {
  char buf[4096];
  for (;;) {
    prism::Result<std::optional<prism::wire::Message>> m = d.next();
    if (!m.is_ok()) {
      std::fprintf(stderr, "raw_peer: %s\n", m.status().message().c_str());
      std::exit(3);
    }
    if (m.value()) return std::move(*m.value());
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) return std::nullopt;
    d.feed(std::string_view(buf, static_cast<std::size_t>(n)));
  }
}

std::string hello_frame() {
  prism::wire::Hello h;
  h.rank = std::atoi(env("RANK").c_str());
  h.world_size = std::atoi(env("WORLD_SIZE").c_str());
  h.pid = ::getpid();
  h.program = "raw_peer";
  h.secret = env("PRISM_SECRET");
  return prism::wire::encode(h, 0);
}

// The coordinator's answer to a hello: prints an error's text.
bool welcomed(int fd, prism::wire::FrameDecoder& d) {
  const std::optional<prism::wire::Message> m = read_message(fd, d);
  if (!m) {
    std::printf("raw_peer: closed without an answer\n");
    return false;
  }
  if (const auto* e = std::get_if<prism::wire::Error>(&*m)) {
    std::printf("raw_peer: refused: %s\n", e->message.c_str());
    return false;
  }
  return std::holds_alternative<prism::wire::Welcome>(*m);
}

// A header for frame `seq` of type `type` announcing `length` payload bytes.
std::string header(std::uint16_t type, std::uint32_t seq, std::uint32_t length) {
  std::string h(prism::wire::kHeaderSize, '\0');
  const std::uint32_t magic = prism::wire::kMagic;
  const std::uint16_t version = prism::wire::kProtocolVersion;
  std::memcpy(h.data(), &magic, 4);
  std::memcpy(h.data() + 4, &version, 2);
  std::memcpy(h.data() + 6, &type, 2);
  std::memcpy(h.data() + 8, &seq, 4);
  std::memcpy(h.data() + 12, &length, 4);
  return h;
}

int bad_rank(const std::string& kind) {
  const int fd = connect_coordinator();
  write_all(fd, hello_frame());
  prism::wire::FrameDecoder d;
  if (!welcomed(fd, d)) return 1;
  const auto op = static_cast<std::uint16_t>(prism::wire::MessageType::kOp);
  if (kind == "garbage") {
    write_all(fd, "GET / HTTP/1.1\r\nHost: prism\r\n\r\n");
  } else if (kind == "truncated") {
    write_all(fd, header(op, 1, 40) + std::string(10, 'x'));
    ::shutdown(fd, SHUT_WR);  // the frame ends there
  } else if (kind == "absurd-length") {
    write_all(fd, header(op, 1, 0xFFFFFFFFu));
  } else {
    std::fprintf(stderr, "raw_peer: unknown kind '%s'\n", kind.c_str());
    return 2;
  }
  while (const std::optional<prism::wire::Message> m = read_message(fd, d)) {
    if (const auto* e = std::get_if<prism::wire::Error>(&*m))
      std::printf("raw_peer: told: %s\n", e->message.c_str());
  }
  ::close(fd);
  return 0;
}

// A stranger: garbage without a hello, then read until the coordinator
// hangs up.
int stranger() {
  const int fd = connect_coordinator();
  write_all(fd, "GET / HTTP/1.1\r\nHost: prism\r\n\r\n");
  char buf[256];
  while (::read(fd, buf, sizeof buf) > 0) {
  }
  ::close(fd);
  std::printf("raw_peer: the coordinator hung up on the stranger\n");
  return 0;
}

int twice() {
  const int fd = connect_coordinator();
  write_all(fd, hello_frame());
  prism::wire::FrameDecoder d;
  const bool in = welcomed(fd, d);
  ::close(fd);
  return in ? 1 : 0;
}

// One malformed or absurd TCPStore query per kind; `v` opens the torch
// 2.2+ dialect (VALIDATE and its magic).
std::string store_query(int kind) {
  auto u8 = [](std::uint8_t b) { return std::string(1, static_cast<char>(b)); };
  auto u32 = [](std::uint32_t x) { return std::string(reinterpret_cast<const char*>(&x), 4); };
  auto u64 = [](std::uint64_t x) { return std::string(reinterpret_cast<const char*>(&x), 8); };
  auto str = [&](const std::string& s) { return u64(s.size()) + s; };
  const std::string v = u8(0) + u32(0x3C85F7CE);
  switch (kind % 10) {
    case 0:
      return "GET / HTTP/1.1\r\n\r\n";  // unknown type 71
    case 1:
      return u8(0) + u32(0xdeadbeef) + u64(1ull << 62);  // legacy SET, absurd key
    case 2:
      return v + u8(1) + u64(1ull << 63);  // SET, 2^63-byte key
    case 3:
      return v + u8(3) + u64(64 * 1024 + 1);  // GET, key over the limit
    case 4:
      return v + u8(1) + u64(10) + "abc";  // SET cut off by the close
    case 5:
      return v + u8(10) + u64(1ull << 40);  // MULTI_GET of 2^40 keys
    case 6:
      return v + u8(200);  // unknown type
    case 7:
      return v + u8(0) + u32(0x3C85F7CE);  // VALIDATE twice
    case 8:
      return v + u8(1) + str(std::string("\0\xff/..", 5)) + str("x");  // odd key: valid
    default:
      return v + u8(6) + u64(1) + str("never/set");  // WAIT, then hang up
  }
}

int store_hammer(int n) {
  const int port = std::atoi(env("MASTER_PORT").c_str());
  std::vector<int> fds;
  for (int i = 0; i < n; ++i) fds.push_back(connect_tcp("127.0.0.1", port));
  for (int i = 0; i < n; ++i) {
    write_all(fds[i], store_query(i));
    ::shutdown(fds[i], SHUT_WR);
  }
  // Reads each until the store hangs up, or 10 s in all pass (a store that
  // keeps a connection after its client's end of stream).
  int closed = 0;
  const Clock::time_point end = Clock::now() + std::chrono::seconds(10);
  for (int fd : fds) {
    char buf[256];
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
      pollfd p{fd, POLLIN, 0};
      if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) break;
      const ssize_t got = ::read(fd, buf, sizeof buf);
      if (got <= 0) {
        ++closed;
        break;
      }
    }
    ::close(fd);
  }
  std::printf("raw_peer: %d store connections, %d closed by the store\n", n, closed);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "rank" && argc == 3) return bad_rank(argv[2]);
  if (mode == "twice" && argc == 2) return twice();
  if (mode == "stranger" && argc == 2) return stranger();
  if (mode == "store-hammer" && argc == 3) return store_hammer(std::atoi(argv[2]));
  std::fprintf(stderr,
               "usage: raw_peer rank garbage|truncated|absurd-length | stranger | twice | "
               "store-hammer N\n");
  return 2;
}
