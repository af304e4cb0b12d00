#include "wire/server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <array>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <asio.hpp>

#include "wire/endpoint.h"
#include "wire/in_process.h"

namespace prism::wire {

namespace {
constexpr std::chrono::milliseconds kAcceptBackoff{100};
using GenericSocket = asio::generic::stream_protocol::socket;
using GenericAcceptor = asio::basic_socket_acceptor<asio::generic::stream_protocol>;
}  // namespace

struct Server::Impl {
  struct Peer {
    explicit Peer(GenericSocket s, asio::io_context& io) : socket(std::move(s)), idle(io) {}
    GenericSocket socket;
    asio::steady_timer idle;
    std::chrono::steady_clock::time_point last_heard;
    std::array<char, 65536> buf;
    FrameDecoder decoder;
    std::deque<std::string> out;
    std::uint32_t sent = 0;
    bool writing = false;
    bool closing = false;   // close once `out` is written
    bool said_bye = false;  // its Bye arrived: end of stream is orderly
    std::string name;       // its address, for messages
  };

  Impl(ServerHandler& h, ServerOptions o) : handler(h), options(o) {}

  // Waits for the listening socket to be readable, then accepts with
  // accept4(SOCK_CLOEXEC) (asio's accept leaves the descriptor inheritable,
  // and a real rank started meanwhile would hold the connection open).
  void accept(GenericAcceptor& acceptor, Address where) {
    acceptor.async_wait(asio::socket_base::wait_read,
                        [this, &acceptor, where](const asio::error_code& ec) {
                          if (ec == asio::error::operation_aborted) return;
                          if (!ec && !accept_ready(acceptor, where))
                            return back_off(acceptor, where);
                          accept(acceptor, where);
                        });
  }

  // Accepts every connection waiting on the (non-blocking) listening socket.
  // False when out of descriptors: the connection stays queued and the
  // socket readable, so waiting again at once would spin.
  bool accept_ready(GenericAcceptor& acceptor, const Address& where) {
    for (;;) {
      const int fd = ::accept4(acceptor.native_handle(), nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          if (!starved)
            fmt::print(stderr,
                       "prism: warning: {}: cannot accept a connection: {}; trying again every "
                       "{} ms\n",
                       where.to_string(), std::strerror(errno), kAcceptBackoff.count());
          starved = true;
          return false;
        }
        return true;  // EAGAIN: none left
      }
      starved = false;
      GenericSocket s(io);
      asio::error_code ec;
      s.assign(acceptor.local_endpoint(ec).protocol(), fd, ec);
      if (ec) {
        ::close(fd);
        continue;
      }
      add_peer(std::move(s), where);
    }
  }

  // Waits kAcceptBackoff before accepting on `acceptor` again.
  void back_off(GenericAcceptor& acceptor, const Address& where) {
    auto& timer = backoff[&acceptor];
    if (!timer) timer = std::make_unique<asio::steady_timer>(io);
    timer->expires_after(kAcceptBackoff);
    timer->async_wait([this, &acceptor, where](const asio::error_code& ec) {
      if (!ec) accept(acceptor, where);
    });
  }

  // The server's end of an in-process channel (wire/in_process.h), owned
  // here until it is a peer: a server gone before it runs closes it.
  void adopt(int fd, const Address& where) {
    auto owned = std::shared_ptr<int>(new int(fd), [](int* f) {
      if (*f >= 0) ::close(*f);
      delete f;
    });
    asio::post(io, [this, owned, where] {
      GenericSocket s(io);
      asio::error_code ec;
      s.assign(asio::generic::stream_protocol(AF_UNIX, SOCK_STREAM), *owned, ec);
      if (ec) return;
      *owned = -1;
      add_peer(std::move(s), where);
    });
  }

  void add_peer(GenericSocket s, const Address& where) {
    set_no_delay(where, s);
    const PeerId id = next_id++;
    auto p = std::make_unique<Peer>(std::move(s), io);
    p->name = fmt::format("{} peer {}", where.to_string(), id);
    Peer& peer = *p;
    peers.emplace(id, std::move(p));
    handler.on_connect(id);
    peer.last_heard = std::chrono::steady_clock::now();
    arm_idle(id, peer, options.idle_timeout);
    read(id, peer);
  }

  // The timer is armed once per timeout, not per message: on expiry it
  // checks when the peer was last heard from and sleeps for the rest.
  void arm_idle(PeerId id, Peer& p, std::chrono::steady_clock::duration wait) {
    if (options.idle_timeout.count() <= 0) return;
    p.idle.expires_after(wait);
    p.idle.async_wait([this, id](const asio::error_code& ec) {
      if (ec) return;  // closed
      auto it = peers.find(id);
      if (it == peers.end()) return;
      const auto silent = std::chrono::steady_clock::now() - it->second->last_heard;
      if (silent < options.idle_timeout)
        return arm_idle(id, *it->second, options.idle_timeout - silent);
      drop(id, Status::deadline_exceeded(fmt::format("{}: no message for {} ms", peer_name(id),
                                                     options.idle_timeout.count())));
    });
  }

  void read(PeerId id, Peer& p) {
    p.socket.async_read_some(asio::buffer(p.buf), [this, id](const asio::error_code& ec,
                                                             std::size_t n) {
      auto it = peers.find(id);
      if (it == peers.end()) return;
      Peer& peer = *it->second;
      if (ec) {
        if (ec == asio::error::operation_aborted) return;
        if (ec == asio::error::eof && peer.said_bye && peer.decoder.buffered() == 0) {
          drop(id, Status::ok());
        } else if (ec == asio::error::eof) {
          drop(id,
               Status::unavailable(fmt::format(
                   "{}: connection closed {}", peer.name,
                   peer.decoder.buffered() > 0 ? "in the middle of a frame" : "without a bye")));
        } else {
          drop(id, Status::unavailable(fmt::format("{}: {}", peer.name, ec.message())));
        }
        return;
      }
      peer.decoder.feed(std::string_view(peer.buf.data(), n));
      peer.last_heard = std::chrono::steady_clock::now();
      for (;;) {
        Result<std::optional<Message>> m = peer.decoder.next();
        if (!m.is_ok()) {
          const Status why = m.status().with_context(peer.name);
          send(id, Error{ErrorCode::kProtocol, m.status().message()});
          close(id);
          handler.on_close(id, why);
          return;
        }
        if (!m.value()) break;
        if (std::holds_alternative<Bye>(*m.value())) peer.said_bye = true;
        handler.on_message(id, std::move(*m.value()));
        if (!peers.contains(id) || peer.closing) return;  // the handler closed it
      }
      read(id, peer);
    });
  }

  void send(PeerId id, const Message& m) {
    auto it = peers.find(id);
    if (it == peers.end() || it->second->closing) return;
    Peer& p = *it->second;
    p.out.push_back(encode(m, p.sent++));
    write(id, p);
  }

  void write(PeerId id, Peer& p) {
    if (p.writing) return;
    if (p.out.empty()) {
      if (p.closing) erase(id);
      return;
    }
    p.writing = true;
    asio::async_write(
        p.socket, asio::buffer(p.out.front()), [this, id](const asio::error_code& ec, std::size_t) {
          auto it = peers.find(id);
          if (it == peers.end()) return;
          Peer& peer = *it->second;
          peer.writing = false;
          if (ec) {
            if (peer.closing) return erase(id);
            return drop(
                id, Status::unavailable(fmt::format("{}: sending: {}", peer.name, ec.message())));
          }
          peer.out.pop_front();
          write(id, peer);
        });
  }

  void close(PeerId id) {
    auto it = peers.find(id);
    if (it == peers.end()) return;
    it->second->closing = true;
    write(id, *it->second);
  }

  // The peer is gone: tell the handler once.
  void drop(PeerId id, const Status& why) {
    if (!peers.contains(id)) return;
    const bool closing = peers.at(id)->closing;
    erase(id);
    if (!closing) handler.on_close(id, why);
  }

  void erase(PeerId id) {
    auto it = peers.find(id);
    if (it == peers.end()) return;
    asio::error_code ignored;
    it->second->idle.cancel();
    it->second->socket.shutdown(asio::socket_base::shutdown_both, ignored);
    it->second->socket.close(ignored);
    // Handlers still queued for this peer find it gone.
    peers.erase(it);
  }

  std::string peer_name(PeerId id) const {
    auto it = peers.find(id);
    return it == peers.end() ? fmt::format("peer {}", id) : it->second->name;
  }

  ServerHandler& handler;
  ServerOptions options;
  asio::io_context io;
  std::vector<std::unique_ptr<GenericAcceptor>> acceptors;
  // Out of descriptors, an acceptor waits on its timer here (and the
  // warning is printed once until a connection is accepted again).
  std::map<const GenericAcceptor*, std::unique_ptr<asio::steady_timer>> backoff;
  bool starved = false;
  std::vector<std::string> unix_paths;
  std::vector<std::string> in_process_names;
  std::map<PeerId, std::unique_ptr<Peer>> peers;
  PeerId next_id = 0;
};

Server::Server(ServerHandler& handler, ServerOptions options)
    : impl_(std::make_unique<Impl>(handler, options)) {}

Server::~Server() {
  for (const std::string& name : impl_->in_process_names) in_process::remove(name);
  asio::error_code ignored;
  for (auto& a : impl_->acceptors) a->close(ignored);
  while (!impl_->peers.empty()) impl_->erase(impl_->peers.begin()->first);
  for (const std::string& path : impl_->unix_paths) ::unlink(path.c_str());
}

Result<Address> Server::listen(const Address& a) {
  if (a.kind == Address::Kind::kInProcess) {
    Impl* impl = impl_.get();
    PRISM_RETURN_IF_ERROR(in_process::add(a.path, [impl, a](int fd) { impl->adopt(fd, a); }));
    impl_->in_process_names.push_back(a.path);
    return a;
  }
  PRISM_ASSIGN_OR_RETURN(const asio::generic::stream_protocol::endpoint ep,
                         resolve_endpoint(a, impl_->io));
  auto acceptor = std::make_unique<GenericAcceptor>(impl_->io);
  asio::error_code ec;
  // Close-on-exec, so the real ranks started later do not inherit it.
  const int fd = ::socket(ep.protocol().family(), ep.protocol().type() | SOCK_CLOEXEC,
                          ep.protocol().protocol());
  if (fd < 0) ec = asio::error_code(errno, asio::system_category());
  if (!ec) {
    acceptor->assign(ep.protocol(), fd, ec);
    if (ec) ::close(fd);
  }
  if (!ec) acceptor->non_blocking(true, ec);
  if (!ec && a.kind == Address::Kind::kTcp)
    acceptor->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor->bind(ep, ec);
  if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return Status::io_error(fmt::format("{}: cannot listen: {}", a.to_string(), ec.message()));
  const Address bound = address_of(a, acceptor->local_endpoint());
  if (a.kind == Address::Kind::kUnix) impl_->unix_paths.push_back(a.path);
  impl_->accept(*acceptor, bound);
  impl_->acceptors.push_back(std::move(acceptor));
  return bound;
}

void Server::send(PeerId peer, const Message& m) {
  impl_->send(peer, m);
}
void Server::close(PeerId peer) {
  impl_->close(peer);
}
std::size_t Server::num_peers() const {
  return impl_->peers.size();
}

void Server::run_for(std::chrono::milliseconds d) {
  impl_->io.restart();
  impl_->io.run_for(d);
}

void Server::poll() {
  impl_->io.restart();
  impl_->io.poll();
}

void Server::stop() {
  impl_->io.stop();
}

}  // namespace prism::wire
