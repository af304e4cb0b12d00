// A TCPStore client for tests: speaks either dialect the way torch's client
// does, over a blocking socket, with a deadline on every read so that a test
// fails instead of hanging. And the store a test starts for it to talk to.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/rendezvous_store.h"
#include "runtime/tcpstore_protocol.h"

namespace prism::runtime::store_testing {

using tcpstore::Bytes;
using tcpstore::bytes_of;
using tcpstore::Dialect;
using tcpstore::Op;
using tcpstore::Query;

inline std::string string_of(const Bytes& b) {
  return std::string(b.begin(), b.end());
}

// A world of n ranks of which `real` run for real.
inline StoreOptions world(std::int32_t n, std::vector<std::int32_t> real) {
  StoreOptions o;
  o.world_size = n;
  o.real_ranks = std::move(real);
  return o;
}

// A store on 127.0.0.1 and a free port; null (and a failed test) when it
// cannot start.
inline std::unique_ptr<RendezvousStore> start_store(StoreOptions o) {
  auto store = RendezvousStore::start("127.0.0.1", 0, std::move(o));
  EXPECT_TRUE(store.is_ok()) << store.status().message();
  return store.is_ok() ? std::move(store).value() : nullptr;
}

// Errors arrive on the store's thread; wait a little for the n-th.
inline std::vector<std::string> errors_after(const RendezvousStore& s, std::size_t n) {
  for (int i = 0; i < 500 && s.errors().size() < n; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return s.errors();
}

// The store's dropped clients once there are `n` (or after 5 s).
inline std::vector<std::string> dropped_after(const RendezvousStore& s, std::size_t n) {
  for (int i = 0; i < 500 && s.dropped().size() < n; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return s.dropped();
}

class TestClient {
 public:
  // Connects to 127.0.0.1:port; a kValidated client sends VALIDATE first.
  TestClient(std::uint16_t port, Dialect dialect) : dialect_(dialect) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    if (connected_ && dialect == Dialect::kValidated) {
      send({.op = Op::kValidate, .word = tcpstore::kValidationMagic});
    }
  }
  ~TestClient() {
    if (fd_ >= 0) ::close(fd_);
  }
  TestClient(const TestClient&) = delete;
  TestClient& operator=(const TestClient&) = delete;

  bool connected() const { return connected_; }

  void send(const Query& q) { send_raw(tcpstore::encode(dialect_, q)); }
  void send_raw(const Bytes& b) {
    std::size_t done = 0;
    while (done < b.size()) {
      ssize_t n = ::send(fd_, b.data() + done, b.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return;
      done += static_cast<std::size_t>(n);
    }
  }

  // Exactly n bytes, or nullopt when the deadline passes or the server closes.
  std::optional<Bytes> read(std::size_t n,
                            std::chrono::milliseconds within = std::chrono::seconds(10)) {
    Bytes out(n);
    std::size_t got = 0;
    const auto until = std::chrono::steady_clock::now() + within;
    while (got < n) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      pollfd p{fd_, POLLIN, 0};
      if (left.count() < 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) {
        return std::nullopt;
      }
      ssize_t r = ::recv(fd_, out.data() + got, n - got, 0);
      if (r <= 0) return std::nullopt;
      got += static_cast<std::size_t>(r);
    }
    return out;
  }
  // Whether the server closed the connection within the time.
  bool closed_by_server(std::chrono::milliseconds within = std::chrono::seconds(10)) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(within.count())) <= 0) return false;
    char c;
    return ::recv(fd_, &c, 1, 0) == 0;
  }

  std::optional<std::uint8_t> read_u8() {
    auto b = read(1);
    return b ? std::optional<std::uint8_t>((*b)[0]) : std::nullopt;
  }
  template <typename T>
  std::optional<T> read_value() {
    auto b = read(sizeof(T));
    if (!b) return std::nullopt;
    T v;
    std::memcpy(&v, b->data(), sizeof v);
    return v;
  }
  std::optional<Bytes> read_bytes(std::chrono::milliseconds within = std::chrono::seconds(10)) {
    auto len = read(8, within);
    if (!len) return std::nullopt;
    std::uint64_t n;
    std::memcpy(&n, len->data(), sizeof n);
    return read(n);
  }

  // Torch-style operations.
  void set(const std::string& k, std::string_view v) {
    send({.op = Op::kSet, .keys = {k}, .values = {bytes_of(v)}});
  }
  std::optional<Bytes> get(const std::string& k) {
    send({.op = Op::kGet, .keys = {k}});
    return read_bytes();
  }
  std::optional<std::int64_t> add(const std::string& k, std::int64_t d) {
    send({.op = Op::kAdd, .keys = {k}, .delta = d});
    return read_value<std::int64_t>();
  }

 private:
  Dialect dialect_;
  int fd_ = -1;
  bool connected_ = false;
};

}  // namespace prism::runtime::store_testing
