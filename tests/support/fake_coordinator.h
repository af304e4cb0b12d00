// FakeCoordinator: one stand-in for the coordinator, for the tests of what a
// live rank does on its side of the wire (the client library, the NCCL
// drop-in, the torch backend). A wire::Server on a Unix socket of its own,
// run on a thread of its own, that records every message the rank sends and
// answers the way the test asks: each op completed `complete_after_ns` after
// it was entered (at once, after a real delay, or only once a wait reaches
// the completion, as the real coordinator does), each wait that no answer
// ends with its horizon, a split with a fixed group; or an abort at an op, a
// refused hello, answers held for the test to inject.
//
// The real coordinator's answering is tested against the real coordinator
// (tests/runtime/coordinator_test.cc); this one only has to be predictable.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "wire/server.h"

namespace prism::testing {

struct FakeCoordinatorOptions {
  std::int64_t start_at = 0;  // the welcome's virtual time
  std::string job = "fake";   // the welcome's job name
  bool capture = false;       // the welcome's capture flag
  // Each op completes this long after its `at`.
  std::int64_t complete_after_ns = 0;
  // false: each op is answered as it arrives. true: as a real coordinator
  // does, only once a wait's `until` reaches the completion (it cannot
  // simulate past the rank's bound), so each poll is a round trip until then.
  bool answer_when_due = false;
  // Real time the server sleeps before it answers an op.
  std::chrono::milliseconds real_delay{0};
  // Ops get no answer but what the test injects.
  bool hold_answers = false;
  // Each wait that no answer sent ends is answered with its horizon.
  bool horizons = true;
  // That op (0, 1, ...) gets an `aborted` error with `abort_message`
  // instead, and the connection closes, as the coordinator does when the
  // emulation ends under a rank.
  int abort_at_op = -1;
  std::string abort_message = "rank 0 crashed";
  // That op gets no answer and the connection closes: the coordinator gone
  // (killed), as the rank sees it.
  int hang_up_at_op = -1;
  // Not empty: every hello is refused with this message.
  std::string refuse;
  // The answer to a split (when ops are answered): the rank's position and
  // the group's members. None: splits are not answered.
  struct Group {
    std::int32_t rank = 0;
    std::vector<std::int32_t> members;
  };
  std::optional<Group> split;
  // NCCL device bytes sent with the completion of op N (wire::Complete).
  std::map<std::uint32_t, std::int64_t> nccl_bytes;
};

class FakeCoordinator : private wire::ServerHandler {
 public:
  explicit FakeCoordinator(FakeCoordinatorOptions options = {});
  ~FakeCoordinator() override;
  FakeCoordinator(const FakeCoordinator&) = delete;
  FakeCoordinator& operator=(const FakeCoordinator&) = delete;

  const wire::Address& address() const { return address_; }

  // Sends `m` to the rank from the server's thread, in order.
  void inject(wire::Message m);

  // Everything the rank sent so far.
  std::vector<wire::Message> seen();
  // What the server thread has handled once it has `n` messages (or 2 s).
  std::vector<wire::Message> seen_at_least(std::size_t n);
  // Everything the rank sent, once its bye is in (or 2 s).
  std::vector<wire::Message> seen_through_bye();
  template <typename T>
  std::vector<T> seen_of() {
    std::vector<T> out;
    for (const wire::Message& m : seen())
      if (const auto* t = std::get_if<T>(&m)) out.push_back(*t);
    return out;
  }

 private:
  void on_message(wire::PeerId peer, wire::Message m) override;
  void on_close(wire::PeerId, const Status&) override {}
  void op(wire::PeerId peer, const wire::Op& op);
  void wait(wire::PeerId peer, const wire::Wait& w);
  bool woken(const wire::Wait& w) const;
  void answer(wire::PeerId peer, std::size_t pending_index);
  void flush();

  const FakeCoordinatorOptions options_;
  std::filesystem::path dir_;  // the socket's, removed at the end
  std::unique_ptr<wire::Server> server_;
  wire::Address address_;
  std::thread thread_;
  std::atomic<bool> done_{false};
  std::mutex mu_;
  std::vector<wire::Message> seen_;
  wire::PeerId peer_ = 0;                 // the last rank welcomed
  std::vector<wire::Complete> answered_;  // in the order sent
  std::vector<wire::Complete> pending_;   // not answered yet (answer_when_due)
  std::vector<wire::Message> outbox_;     // injected, not sent yet
  int ops_ = 0;
};

}  // namespace prism::testing
