// Server: the coordinator's end of the wire. One thread runs it (run_for /
// poll) and every callback comes on that thread, so the coordinator needs no
// locks. Each connection is a peer with its own FrameDecoder: a malformed
// frame gets an Error message back and closes that peer; a peer silent for
// longer than the idle timeout is closed too; both reach the handler as
// on_close with the reason, so the coordinator can end the emulation
// cleanly instead of waiting forever. Out of file descriptors (EMFILE), the
// accept loop warns once on stderr and tries again every 100 ms instead of
// spinning. Every descriptor it opens is close-on-exec.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "util/status.h"
#include "wire/address.h"
#include "wire/protocol.h"

namespace prism::wire {

using PeerId = std::uint32_t;

class ServerHandler {
 public:
  virtual ~ServerHandler() = default;
  virtual void on_connect(PeerId) {}
  virtual void on_message(PeerId peer, Message m) = 0;
  // The peer is gone. `why` is ok when it closed after a Bye or the server
  // closed it; otherwise it says what happened: end of stream without Bye
  // or a failed read or write (unavailable), a protocol error
  // (invalid_argument), silence past the idle timeout (deadline_exceeded).
  virtual void on_close(PeerId peer, const Status& why) = 0;
};

struct ServerOptions {
  // A peer that sends nothing for this long is closed; zero = no limit.
  std::chrono::milliseconds idle_timeout{0};
};

class Server {
 public:
  Server(ServerHandler& handler, ServerOptions options);
  ~Server();  // closes every peer and removes Unix socket files it created
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Listens on `a` (callable for several addresses). Returns the bound
  // address: a TCP port 0 becomes the port the system chose. An in-process
  // address takes connections from this process only (wire/in_process.h).
  Result<Address> listen(const Address& a);

  // Queues a message to the peer; unknown or closed peers are ignored.
  void send(PeerId peer, const Message& m);
  // Sends what is queued, then closes the peer (no on_close follows).
  void close(PeerId peer);
  std::size_t num_peers() const;

  // Runs the event loop for at most `d`, or until stop().
  void run_for(std::chrono::milliseconds d);
  // Runs what is ready without waiting; a coordinator that spins on poll()
  // answers without the wake-up of a blocked thread.
  void poll();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace prism::wire
