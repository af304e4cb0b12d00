// LiveSession: the coordinator's side of a session with live ranks, shared
// by the emulation (runtime/coordinator.h) and the capture
// (runtime/program_capture.h). What differs between the two, how a live
// rank's messages are answered, is a LivePolicy: the replay policy answers
// each op at its emulated completion, the capture policy at once.
//
// The session owns the wire::Server and everything about the ranks'
// connections: the hello checks (the job's world size, a rank the policy
// expects, connected once), "the first message must be hello", the
// run/tick/drain loop, the connect timeout, a rank's connection lost, and the
// end of a failed session, where every rank still connected is told (the
// culprit with its own error code, the others `aborted`) and closed.
//
// Single-threaded: every callback into the policy comes on the thread that
// calls run().
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "graph/layout.h"
#include "util/status.h"
#include "wire/address.h"
#include "wire/server.h"

namespace prism::runtime {

using SteadyClock = std::chrono::steady_clock;

class LivePolicy {
 public:
  virtual ~LivePolicy() = default;
  // Why rank `r` of the job's world is not expected here (for its refusal).
  virtual std::string not_expected(Rank r) const = 0;
  // Rank `r` passed the hello checks: welcome it.
  virtual void hello(Rank r, const wire::Hello& h) = 0;
  // A message from rank `r` after its hello. An error ends the session; the
  // rank is told error_code(r).
  virtual Status handle(Rank r, const wire::Message& m) = 0;
  virtual wire::ErrorCode error_code(Rank) const { return wire::ErrorCode::kRejected; }
  // Rank `r`'s connection is gone without the session closing it (`why` ok:
  // an orderly end of stream). Returns the failure this is, or ok.
  virtual Status closed(Rank r, const Status& why) = 0;
  // Every few milliseconds once every rank is connected: silence past the
  // timeout, say. An error ends the session.
  virtual Status check(SteadyClock::time_point now) = 0;
  // The session finished without failing; last words before the drain.
  virtual void finishing() {}
};

struct LiveSessionOptions {
  std::vector<Rank> ranks;  // the live ranks expected, ascending
  int world_size = 0;
  std::string noun;  // "live rank", "captured rank": how messages name a rank
  // Not every rank connected this long after the start fails the session.
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
  // The run's secret: a hello that does not carry it is refused (that peer
  // alone; the session goes on), before anything else of it is believed.
  std::string secret;
};

class LiveSession : private wire::ServerHandler {
 public:
  LiveSession(LiveSessionOptions options, LivePolicy& policy);
  ~LiveSession() override;
  LiveSession(const LiveSession&) = delete;
  LiveSession& operator=(const LiveSession&) = delete;

  // On TCP anyone who reaches the port can connect: a peer that never said
  // hello and sends garbage is dropped there (said on stderr), while on a
  // private Unix socket, which only PrismLLM's ranks know, it ends the run.
  Result<wire::Address> listen(const wire::Address& a) {
    tcp_ = a.kind == wire::Address::Kind::kTcp;
    return server_.listen(a);
  }

  // Runs until finish() or fail(); then lets the last frames reach the
  // ranks. `tick` runs every few milliseconds; an error from it (a rank's
  // process died) fails the session. Returns the failure, or ok.
  Status run(const std::function<Status()>& tick);

  // Rank `r` has said hello (and may have gone since).
  bool connected(Rank r) const;
  // Connected and not gone: the session can still send to it.
  bool open(Rank r) const;
  void send(Rank r, const wire::Message& m);
  // Sends what is queued, then closes: after a goodbye (the rank reads up to
  // this close), or at the end.
  void close(Rank r);
  // The rank's silence counts from now.
  void heard(Rank r);
  SteadyClock::time_point last_heard(Rank r) const;
  std::string seconds_of_timeout() const;

  void finish();
  // Ends the session with `why`: every open rank is told (`culprit` with
  // `code`, the others `aborted`) unless it said goodbye, and closed.
  void fail(Status why, std::optional<Rank> culprit = std::nullopt,
            wire::ErrorCode code = wire::ErrorCode::kAborted);
  bool ended() const { return finished_ || !failed_.is_ok(); }
  bool failed() const { return !failed_.is_ok(); }

 private:
  struct Peer {
    std::optional<wire::PeerId> id;  // set at its hello
    bool open = false;               // not gone, and not closed after its goodbye
    SteadyClock::time_point last_heard;
  };

  void on_message(wire::PeerId id, wire::Message m) override;
  void on_close(wire::PeerId id, const Status& why) override;
  void hello(wire::PeerId id, const wire::Hello& h);
  Status check_timeouts(SteadyClock::time_point now);
  Peer& peer(Rank r) { return peers_.at(r); }
  const Peer& peer(Rank r) const { return peers_.at(r); }

  LiveSessionOptions options_;
  LivePolicy& policy_;
  wire::Server server_;
  std::map<Rank, Peer> peers_;
  std::map<wire::PeerId, Rank> rank_of_;
  SteadyClock::time_point started_;
  Status failed_;
  bool finished_ = false;
  bool tcp_ = false;         // listening on TCP (listen)
  int strangers_named_ = 0;  // dropped peers said on stderr
};

}  // namespace prism::runtime
