#include "wire/connection.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <array>
#include <optional>

#include <fmt/format.h>
#include <asio.hpp>

#include "wire/endpoint.h"
#include "wire/in_process.h"

namespace prism::wire {

struct Connection::Impl {
  Address address;
  asio::io_context io;
  asio::generic::stream_protocol::socket socket{io};
  FrameDecoder decoder;
  std::uint32_t sent = 0;
  std::chrono::microseconds spin{0};
  // The first failure of each direction; later calls repeat it. A failed
  // send leaves receiving alone: the coordinator's last words (an error
  // frame before it closed) can still be read.
  Status send_broken;
  Status broken;
};

Connection::Connection(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Connection::~Connection() = default;

Result<std::unique_ptr<Connection>> Connection::open(const Address& a,
                                                     std::chrono::milliseconds timeout) {
  auto impl = std::make_unique<Impl>();
  impl->address = a;
  if (a.kind == Address::Kind::kInProcess) {
    PRISM_ASSIGN_OR_RETURN(const int fd, in_process::connect(a.path));
    asio::error_code ec;
    impl->socket.assign(asio::generic::stream_protocol(AF_UNIX, SOCK_STREAM), fd, ec);
    if (ec) {
      ::close(fd);
      return Status::io_error(fmt::format("{}: {}", a.to_string(), ec.message()));
    }
    return std::unique_ptr<Connection>(new Connection(std::move(impl)));
  }
  PRISM_ASSIGN_OR_RETURN(const asio::generic::stream_protocol::endpoint ep,
                         resolve_endpoint(a, impl->io));
  // Close-on-exec: a program that runs others keeps its connection to itself.
  const int fd = ::socket(ep.protocol().family(), ep.protocol().type() | SOCK_CLOEXEC,
                          ep.protocol().protocol());
  if (fd < 0)
    return Status::io_error(fmt::format("{}: socket: {}", a.to_string(), std::strerror(errno)));
  asio::error_code assigned;
  impl->socket.assign(ep.protocol(), fd, assigned);
  if (assigned) {
    ::close(fd);
    return Status::io_error(fmt::format("{}: {}", a.to_string(), assigned.message()));
  }
  std::optional<asio::error_code> result;
  impl->socket.async_connect(ep, [&](const asio::error_code& ec) { result = ec; });
  impl->io.run_for(timeout);
  if (!result) {
    asio::error_code ignored;
    impl->socket.close(ignored);
    return Status::deadline_exceeded(fmt::format("{}: the coordinator did not accept within {} ms",
                                                 a.to_string(), timeout.count()));
  }
  if (*result) {
    return Status::unavailable(
        fmt::format("{}: cannot connect: {}", a.to_string(), result->message()));
  }
  set_no_delay(a, impl->socket);
  return std::unique_ptr<Connection>(new Connection(std::move(impl)));
}

void Connection::set_spin(std::chrono::microseconds spin) {
  impl_->spin = spin;
}

Status Connection::send(const Message& m) {
  Impl& c = *impl_;
  if (!c.send_broken.is_ok()) return c.send_broken;
  const std::string frame = encode(m, c.sent);
  asio::error_code ec;
  asio::write(c.socket, asio::buffer(frame), ec);
  if (ec) {
    c.send_broken = Status::unavailable(fmt::format("{}: sending {}: {}", c.address.to_string(),
                                                    to_string(type_of(m)), ec.message()));
    return c.send_broken;
  }
  ++c.sent;
  return Status::ok();
}

Result<Message> Connection::receive(std::chrono::milliseconds timeout) {
  Impl& c = *impl_;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (!c.broken.is_ok()) return c.broken;
    Result<std::optional<Message>> next = c.decoder.next();
    if (!next.is_ok()) {
      c.broken = next.status().with_context(c.address.to_string());
      return c.broken;
    }
    if (next.value()) return std::move(*next.value());
    // Spin on non-blocking reads first: an answer that comes within the spin
    // saves waking a blocked thread, about half of a round trip.
    std::array<char, 65536> buf;
    const int fd = c.socket.native_handle();
    ssize_t got = ::recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
    const auto spin_until = std::min(deadline, std::chrono::steady_clock::now() + c.spin);
    while (got < 0 && errno == EAGAIN && std::chrono::steady_clock::now() < spin_until)
      got = ::recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p{fd, POLLIN, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(left.count(), 0)));
      if (ready == 0) {
        return Status::deadline_exceeded(
            fmt::format("{}: no answer within {} ms", c.address.to_string(), timeout.count()));
      }
      continue;
    }
    asio::error_code ec;
    if (got == 0) ec = asio::error::eof;
    if (got < 0) ec = asio::error_code(errno, asio::system_category());
    const auto n = static_cast<std::size_t>(std::max<ssize_t>(got, 0));
    if (ec == asio::error::eof) {
      c.broken = Status::unavailable(
          fmt::format("{}: the coordinator closed the connection{}", c.address.to_string(),
                      c.decoder.buffered() > 0 ? " in the middle of a frame" : ""));
    } else if (ec) {
      c.broken = Status::unavailable(
          fmt::format("{}: receiving: {}", c.address.to_string(), ec.message()));
    } else {
      c.decoder.feed(std::string_view(buf.data(), n));
    }
  }
}

bool Connection::readable(std::chrono::microseconds within) const {
  pollfd p{impl_->socket.native_handle(), POLLIN, 0};
  const auto us = std::max<std::int64_t>(within.count(), 0);
  const timespec ts{static_cast<time_t>(us / 1'000'000), static_cast<long>(us % 1'000'000) * 1000};
  return ::ppoll(&p, 1, &ts, nullptr) > 0;
}

const Address& Connection::address() const {
  return impl_->address;
}
std::uint32_t Connection::sent() const {
  return impl_->sent;
}
std::uint32_t Connection::received() const {
  return impl_->decoder.frames();
}

}  // namespace prism::wire
