#include "support/fake_coordinator.h"

#include <unistd.h>

#include <algorithm>

namespace prism::testing {

using namespace std::chrono_literals;

FakeCoordinator::FakeCoordinator(FakeCoordinatorOptions options)
    : options_(std::move(options)),
      server_(std::make_unique<wire::Server>(static_cast<wire::ServerHandler&>(*this),
                                             wire::ServerOptions{})) {
  static std::atomic<int> n{0};
  // Appended rather than concatenated: GCC 12 warns falsely (-Wrestrict)
  // about "literal" + std::string.
  std::string name = "prism-fake-coordinator-";
  name += std::to_string(::getpid());
  name += "-";
  name += std::to_string(n++);
  dir_ = std::filesystem::temp_directory_path() / name;
  std::filesystem::create_directories(dir_);
  address_ =
      server_->listen(wire::Address{wire::Address::Kind::kUnix, (dir_ / "c.sock").string(), "", 0})
          .value();
  thread_ = std::thread([this] {
    while (!done_) {
      server_->run_for(2ms);
      flush();
    }
  });
}

FakeCoordinator::~FakeCoordinator() {
  done_ = true;
  thread_.join();
  server_.reset();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

void FakeCoordinator::inject(wire::Message m) {
  std::lock_guard lock(mu_);
  if (const auto* done = std::get_if<wire::Complete>(&m)) answered_.push_back(*done);
  outbox_.push_back(std::move(m));
}

std::vector<wire::Message> FakeCoordinator::seen() {
  std::lock_guard lock(mu_);
  return seen_;
}

std::vector<wire::Message> FakeCoordinator::seen_at_least(std::size_t n) {
  for (int i = 0; i < 400 && seen().size() < n; ++i) std::this_thread::sleep_for(5ms);
  return seen();
}

std::vector<wire::Message> FakeCoordinator::seen_through_bye() {
  for (int i = 0; i < 400; ++i) {
    std::vector<wire::Message> all = seen();
    if (!all.empty() && std::holds_alternative<wire::Bye>(all.back())) return all;
    std::this_thread::sleep_for(5ms);
  }
  return seen();
}

void FakeCoordinator::on_message(wire::PeerId peer, wire::Message m) {
  std::lock_guard lock(mu_);
  seen_.push_back(m);
  if (const auto* h = std::get_if<wire::Hello>(&m)) {
    if (!options_.refuse.empty()) {
      server_->send(peer, wire::Error{wire::ErrorCode::kRejected, options_.refuse});
      server_->close(peer);
      return;
    }
    peer_ = peer;
    server_->send(peer, wire::Welcome{h->rank, h->world_size, options_.start_at, options_.job,
                                      options_.capture});
  } else if (const auto* o = std::get_if<wire::Op>(&m)) {
    op(peer, *o);
  } else if (const auto* w = std::get_if<wire::Wait>(&m)) {
    wait(peer, *w);
  } else if (const auto* split = std::get_if<wire::CommSplit>(&m)) {
    if (options_.split && !options_.hold_answers)
      server_->send(peer,
                    wire::CommInfo{split->comm, options_.split->rank, options_.split->members});
  } else if (std::holds_alternative<wire::Bye>(m)) {
    server_->close(peer);  // as the coordinator does: the rank reads up to this close
  }
}

void FakeCoordinator::op(wire::PeerId peer, const wire::Op& op) {
  if (ops_ == options_.hang_up_at_op) {
    ++ops_;
    server_->close(peer);
    return;
  }
  if (ops_++ == options_.abort_at_op) {
    // As the coordinator does: the error, then the connection closes.
    server_->send(peer, wire::Error{wire::ErrorCode::kAborted, options_.abort_message});
    server_->close(peer);
    return;
  }
  if (options_.hold_answers) return;
  if (options_.real_delay.count() > 0) std::this_thread::sleep_for(options_.real_delay);
  const auto nccl = options_.nccl_bytes.find(op.op_id);
  pending_.push_back(wire::Complete{op.op_id, op.at + options_.complete_after_ns,
                                    nccl != options_.nccl_bytes.end() ? nccl->second : 0});
  if (!options_.answer_when_due) answer(peer, pending_.size() - 1);
}

// Answers what completes by the wait's end (with no limit, the op it waits
// for, or any op's first), then the wait's horizon if nothing ends it.
void FakeCoordinator::wait(wire::PeerId peer, const wire::Wait& w) {
  for (std::size_t i = 0; i < pending_.size();) {
    const bool due = w.until == wire::kNoLimit
                         ? (w.op_id == wire::kAnyOp || pending_[i].op_id == w.op_id)
                         : pending_[i].at <= w.until;
    if (due) {
      answer(peer, i);
    } else {
      ++i;
    }
  }
  if (options_.horizons && w.until != wire::kNoLimit && !woken(w))
    server_->send(peer, wire::Horizon{w.wait_id, w.until});
}

// Whether an answer already sent ends wait `w`: for one op, its answer; for
// any op, any answer after the first `answers_seen`.
bool FakeCoordinator::woken(const wire::Wait& w) const {
  if (w.op_id == wire::kAnyOp) return answered_.size() > w.answers_seen;
  return std::any_of(answered_.begin(), answered_.end(),
                     [&](const wire::Complete& c) { return c.op_id == w.op_id; });
}

void FakeCoordinator::answer(wire::PeerId peer, std::size_t pending_index) {
  answered_.push_back(pending_[pending_index]);
  pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(pending_index));
  server_->send(peer, answered_.back());
}

void FakeCoordinator::flush() {
  std::lock_guard lock(mu_);
  for (const wire::Message& m : outbox_) server_->send(peer_, m);
  outbox_.clear();
}

}  // namespace prism::testing
