// Connection: a live rank's end of the wire (blocking, one thread at a time).
// It numbers the frames it sends and checks the ones it receives
// (wire/protocol.h); every wait has a deadline, so a coordinator that dies
// or hangs is an error, never a hang.
#pragma once

#include <chrono>
#include <memory>

#include "util/status.h"
#include "wire/address.h"
#include "wire/protocol.h"

namespace prism::wire {

class Connection {
 public:
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Connects within `timeout`. A socket path that does not exist or a
  // refused port (unavailable), or a coordinator that does not accept in
  // time (deadline_exceeded), is an error naming the address. An in-process
  // address (wire/in_process.h) connects at once, or is unavailable.
  static Result<std::unique_ptr<Connection>> open(const Address& a,
                                                  std::chrono::milliseconds timeout);

  Status send(const Message& m);
  // The next message, waiting at most `timeout`. Errors: the coordinator
  // closed the connection (unavailable, as is a failed send), sent a
  // malformed frame (invalid_argument), or sent nothing in time
  // (deadline_exceeded).
  Result<Message> receive(std::chrono::milliseconds timeout);

  // How long receive() polls without blocking before it sleeps in poll():
  // a live rank about to wait anyway trades a spinning core for about half
  // of the round trip (docs/benchmarks.md, prism_bench_wire). Default 0.
  void set_spin(std::chrono::microseconds spin);

  // Whether data (or the peer's close) arrives within `within`; reads
  // nothing. Unlike the rest, callable while another thread uses the
  // connection (a progress thread waiting outside its lock): what that
  // thread reads meanwhile, or has read already and not yet decoded, it
  // does not see, and then waits out `within`.
  bool readable(std::chrono::microseconds within) const;

  const Address& address() const;
  // Frames sent and received so far.
  std::uint32_t sent() const;
  std::uint32_t received() const;

 private:
  struct Impl;
  explicit Connection(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace prism::wire
