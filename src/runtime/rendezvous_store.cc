// RendezvousStore's transport: one thread, poll(2) over the listening socket,
// an eventfd that stops it, and the clients; every byte goes to StoreState,
// and what it says to send, close and report is done here.
#include "runtime/rendezvous_store.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "runtime/rendezvous_store_state.h"

namespace prism::runtime {
namespace {

constexpr std::chrono::milliseconds kAcceptBackoff{100};

std::string errno_text(int err) {
  return std::strerror(err);
}

std::string peer_name(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return "unknown peer";
  char host[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&a);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    return fmt::format("{}:{}", host, ntohs(in->sin_port));
  }
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&a);
  ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
  return fmt::format("[{}]:{}", host, ntohs(in6->sin6_port));
}

// A listening, non-blocking TCP socket on host:port, and the port it got.
Result<std::pair<int, std::uint16_t>> listen_on(const std::string& host, std::uint16_t port) {
  const std::string where = fmt::format("rendezvous store: cannot listen on {}:{}", host, port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (int rc =
          ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found);
      rc != 0) {
    return Status::io_error(fmt::format("{}: {}", where, ::gai_strerror(rc)));
  }
  int last_error = EADDRNOTAVAIL;
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last_error = errno;
      continue;
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
      last_error = errno;
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0) return Status::io_error(fmt::format("{}: {}", where, errno_text(last_error)));
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  const std::uint16_t got = bound.ss_family == AF_INET
                                ? ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port)
                                : ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  return std::make_pair(fd, got);
}

}  // namespace

class RendezvousStore::Impl {
 public:
  Impl(const StoreOptions& options, int listen_fd, int wake_fd)
      : state_(options),
        on_error_(options.on_error),
        on_drop_(options.on_drop),
        on_trace_(options.on_trace),
        listen_fd_(listen_fd),
        wake_fd_(wake_fd) {
    thread_ = std::thread([this] { loop(); });
  }

  ~Impl() {
    stop_ = true;
    const std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof one);
    thread_.join();
    for (auto& [id, conn] : conns_) ::close(conn.fd);
    ::close(listen_fd_);
    ::close(wake_fd_);
  }

  std::vector<std::string> errors() const {
    std::lock_guard<std::mutex> lock(mu_);
    return errors_;
  }

  std::vector<std::string> dropped() const {
    std::lock_guard<std::mutex> lock(mu_);
    return dropped_;
  }

 private:
  struct Conn {
    int fd = -1;
    tcpstore::Bytes out;  // answers not yet written
  };

  void loop() {
    std::vector<pollfd> fds;
    std::vector<ClientId> ids;
    while (!stop_) {
      // Out of descriptors, the listening socket stays readable: leave it
      // out of the poll until the backoff ends.
      const bool accepting = StoreClock::now() >= accept_after_;
      fds.assign({{wake_fd_, POLLIN, 0}, {accepting ? listen_fd_ : -1, POLLIN, 0}});
      ids.clear();
      for (const auto& [id, conn] : conns_) {
        const short events = static_cast<short>(POLLIN | (conn.out.empty() ? 0 : POLLOUT));
        fds.push_back({conn.fd, events, 0});
        ids.push_back(id);
      }
      if (::poll(fds.data(), fds.size(), poll_timeout_ms()) < 0 && errno != EINTR) {
        report(
            {fmt::format("rendezvous store: poll failed: {}; serving stops", errno_text(errno))});
        return;
      }
      if (fds[0].revents != 0) return;
      if (fds[1].revents != 0) accept_all();
      for (std::size_t i = 0; i < ids.size(); ++i) {
        const short ev = fds[i + 2].revents;
        if (ev & POLLOUT) flush(ids[i]);
        if (ev & (POLLIN | POLLHUP | POLLERR)) read_from(ids[i]);
      }
      StoreEffects effects;
      state_.advance(StoreClock::now(), effects);
      apply(effects);
    }
  }

  int poll_timeout_ms() const {
    auto next = state_.next_deadline();
    if (StoreClock::now() < accept_after_ && (!next || accept_after_ < *next)) next = accept_after_;
    if (!next) return -1;
    auto left = std::chrono::ceil<std::chrono::milliseconds>(*next - StoreClock::now()).count();
    return static_cast<int>(std::clamp<std::int64_t>(left, 0, 60'000));
  }

  void accept_all() {
    while (true) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0 && (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)) {
        if (!starved_)
          fmt::print(stderr,
                     "prism: warning: rendezvous store: cannot accept a connection: {}; trying "
                     "again every {} ms\n",
                     errno_text(errno), kAcceptBackoff.count());
        starved_ = true;
        accept_after_ = StoreClock::now() + kAcceptBackoff;
        return;
      }
      if (fd < 0) return;  // EAGAIN, or a connection that went away first
      starved_ = false;
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      const ClientId id = next_id_++;
      conns_[id].fd = fd;
      state_.connect(id, peer_name(fd));
    }
  }

  void read_from(ClientId id) {
    std::uint8_t buf[64 * 1024];
    while (conns_.contains(id)) {
      const ssize_t n = ::recv(conns_[id].fd, buf, sizeof buf, 0);
      if (n > 0) {
        StoreEffects effects;
        state_.receive(id, std::span(buf, static_cast<std::size_t>(n)), StoreClock::now(), effects);
        apply(effects);
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
      drop(id);  // end of stream or a reset: the rank is gone, torch's server says nothing
      return;
    }
  }

  void apply(StoreEffects& effects) {
    // Errors first: a client told of one (an object's failure as its value)
    // must not act on it before the owner can see it.
    report(effects.errors);
    for (auto& [id, bytes] : effects.sends) {
      auto it = conns_.find(id);
      if (it == conns_.end()) continue;
      it->second.out.insert(it->second.out.end(), bytes.begin(), bytes.end());
      flush(id);
    }
    for (ClientId id : effects.closes) close_conn(id);
    if (on_trace_)
      for (const auto& n : effects.notes) on_trace_(n);
    for (const auto& d : effects.dropped) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (dropped_.size() < kMaxDropped) dropped_.push_back(d);
      }
      if (on_drop_) on_drop_(d);
    }
  }

  void flush(ClientId id) {
    auto it = conns_.find(id);
    if (it == conns_.end()) return;
    Conn& c = it->second;
    std::size_t done = 0;
    while (done < c.out.size()) {
      const ssize_t n = ::send(c.fd, c.out.data() + done, c.out.size() - done, MSG_NOSIGNAL);
      if (n > 0) {
        done += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
      drop(id);
      return;
    }
    c.out.erase(c.out.begin(), c.out.begin() + static_cast<std::ptrdiff_t>(done));
  }

  void drop(ClientId id) {
    state_.disconnect(id);
    close_conn(id);
  }

  void close_conn(ClientId id) {
    auto it = conns_.find(id);
    if (it == conns_.end()) return;
    ::close(it->second.fd);
    conns_.erase(it);
  }

  void report(const std::vector<std::string>& errors) {
    if (errors.empty()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      errors_.insert(errors_.end(), errors.begin(), errors.end());
    }
    if (on_error_) {
      for (const auto& e : errors) on_error_(e);
    }
  }

  StoreState state_;
  std::function<void(const std::string&)> on_error_;
  std::function<void(const std::string&)> on_drop_;
  std::function<void(const std::string&)> on_trace_;
  int listen_fd_;
  int wake_fd_;
  std::map<ClientId, Conn> conns_;
  ClientId next_id_ = 1;
  StoreClock::time_point accept_after_{};  // out of descriptors: no accept before
  bool starved_ = false;                   // warned, until a connection is accepted
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::vector<std::string> errors_;
  std::vector<std::string> dropped_;
  std::thread thread_;  // last: starts after every member above exists
};

Result<std::unique_ptr<RendezvousStore>> RendezvousStore::start(const std::string& host,
                                                                std::uint16_t port,
                                                                StoreOptions options) {
  if (Status s = validate_options(options); !s.is_ok()) {
    return s.with_context("rendezvous store");
  }
  PRISM_ASSIGN_OR_RETURN(auto listening, listen_on(host, port));
  const int wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd < 0) {
    ::close(listening.first);
    return Status::io_error(fmt::format("rendezvous store: eventfd: {}", errno_text(errno)));
  }
  auto impl = std::make_unique<Impl>(options, listening.first, wake_fd);
  return std::unique_ptr<RendezvousStore>(new RendezvousStore(std::move(impl), listening.second));
}

RendezvousStore::RendezvousStore(std::unique_ptr<Impl> impl, std::uint16_t port)
    : impl_(std::move(impl)), port_(port) {}

RendezvousStore::~RendezvousStore() = default;

std::vector<std::string> RendezvousStore::errors() const {
  return impl_->errors();
}

std::vector<std::string> RendezvousStore::dropped() const {
  return impl_->dropped();
}

}  // namespace prism::runtime
