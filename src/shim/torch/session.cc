#include "shim/torch/session.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <utility>

namespace prism::torch_shim {

namespace {

// An integer environment variable, or `fallback` when unset or not a number.
std::int64_t env_int(const char* name, std::int64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long long x = std::strtoll(v, &end, 10);
  return end != nullptr && *end == '\0' ? x : fallback;
}

std::string who_text(const Identity& w) {
  return "rank " + std::to_string(w.rank) + " of " + std::to_string(w.world_size);
}

}  // namespace

Session& Session::get() {
  // Destroyed at exit after Python's atexit hook has normally closed it:
  // then a no-op; otherwise the fallback goodbye.
  static Session session;
  return session;
}

Session::~Session() {
  shutdown(0, false);
}

void Session::connect(const Identity& who) {
  std::lock_guard lock(mu_);
  if (client_ != nullptr) {
    if (who.rank != who_.rank || who.world_size != who_.world_size) {
      throw std::runtime_error("prism: a process group of " + who_text(who) +
                               ", but this process connected to the coordinator as " +
                               who_text(who_));
    }
    return;
  }
  if (!broken_.empty()) throw std::runtime_error(broken_);
  const char* address = std::getenv("PRISM_COORDINATOR");
  if (address == nullptr || *address == '\0') {
    throw std::runtime_error(
        "prism: PRISM_COORDINATOR is not set: the 'prism' torch.distributed backend runs only "
        "under `prism emulate JOB --real-ranks LIST -- PROGRAM` (docs/emulate.md), which sets it "
        "to the coordinator's address");
  }
  const auto timeout_ms = static_cast<std::int32_t>(env_int("PRISM_TIMEOUT_MS", 0));
  prism_client* c = nullptr;
  const prism_status s =
      prism_connect(address, who.rank, who.world_size, who.local_rank, "python", timeout_ms, &c);
  if (s != PRISM_OK) {
    std::string why = c != nullptr ? prism_last_error(c) : "out of memory";
    prism_close(c, 1);
    throw std::runtime_error("prism: " + who_text(who) + " cannot connect to the coordinator at '" +
                             address + "': " + why);
  }
  client_ = c;
  capturing_ = prism_capturing(c) != 0;
  pid_ = ::getpid();
  who_ = who;
  poll_ = std::chrono::microseconds(env_int("PRISM_TORCH_POLL_US", 200));
  progress_ = std::make_unique<std::thread>([this] { progress_loop(); });
}

bool Session::connected() {
  std::lock_guard lock(mu_);
  return client_ != nullptr;
}

void Session::check_usable_locked() const {
  if (!broken_.empty()) throw std::runtime_error(broken_);
  if (client_ == nullptr)
    throw std::runtime_error("prism: no process group was created: not connected");
}

void Session::throw_locked(const std::string& doing) {
  const std::string cause = prism_last_error(client_);
  const std::string why = "prism: " + doing + ": " + cause;
  std::vector<Ready> failed = fail_all_locked(cause);
  // The Done callbacks must not run under the lock; they only fail works.
  mu_.unlock();
  run(failed);
  mu_.lock();
  throw std::runtime_error(why);
}

std::uint32_t Session::comm_init(std::int32_t nranks, std::int32_t rank_in_comm,
                                 const std::vector<std::int32_t>& members) {
  std::lock_guard lock(mu_);
  check_usable_locked();
  const std::uint32_t comm = next_comm_++;
  if (prism_comm_init(client_, comm, nranks, rank_in_comm, members.data(), 0) != PRISM_OK) {
    throw_locked("declaring process group " + std::to_string(comm) + " (" + std::to_string(nranks) +
                 " ranks)");
  }
  return comm;
}

std::uint32_t Session::new_group_id() {
  std::lock_guard lock(mu_);
  return next_group_++;
}

std::uint64_t Session::enter(std::span<const prism_op> ops, const std::string& what, Done done) {
  if (ops.empty()) {
    done("");
    return 0;
  }
  std::unique_lock lock(mu_);
  check_usable_locked();
  Entry entry{{}, what, std::move(done)};
  for (const prism_op& op : ops) {
    std::uint64_t ticket = 0;
    if (prism_enter(client_, &op, &ticket) != PRISM_OK) throw_locked("entering " + what);
    entry.tickets.push_back(ticket);
  }
  const std::uint64_t id = next_entry_++;
  ++entered_;  // ends a quiet wait of the progress thread
  for (std::uint64_t t : entry.tickets) owner_[t] = id;
  entries_.emplace(id, std::move(entry));
  // The first poll, from here: its answer (a horizon, or a completion) is
  // what wakes the progress thread, which need not wake for the op itself.
  std::uint64_t ticket = PRISM_NO_TICKET;
  std::vector<Ready> ready;
  if (prism_poll_after_enter(client_, &ticket) != PRISM_OK) {
    ready = fail_all_locked(prism_last_error(client_));
  } else if (ticket != PRISM_NO_TICKET) {
    ready = spend_locked(ticket, true);
  }
  lock.unlock();
  work_cv_.notify_one();  // only a thread asleep on a quiet time waits here
  run(ready);
  return id;
}

void Session::wait(std::uint64_t id) {
  std::unique_lock lock(mu_);
  std::vector<Ready> ready;
  if (capturing_) say_polled_waits_locked(id);
  const auto it = entries_.find(id);
  if (it == entries_.end()) return;
  while (ready.empty()) {
    // A group's ops are waited for one by one: the clock ends at the last
    // completion, as it would when all are waited for together.
    const std::uint64_t ticket = it->second.tickets.front();
    if (prism_wait(client_, ticket) != PRISM_OK) {
      ready = fail_all_locked(prism_last_error(client_));
    } else {
      ready = spend_locked(ticket, false);
    }
  }
  lock.unlock();
  run(ready);
}

void Session::say_polled_waits_locked(std::uint64_t id) {
  const auto polled = polled_.find(id);
  if (polled == polled_.end()) return;
  const std::vector<std::uint64_t> tickets = std::move(polled->second);
  polled_.erase(polled);
  for (std::uint64_t t : tickets) {
    if (prism_waited(client_, t) != PRISM_OK) {
      std::vector<Ready> failed = fail_all_locked(prism_last_error(client_));
      mu_.unlock();
      run(failed);
      mu_.lock();
      return;
    }
  }
}

std::vector<Session::Ready> Session::spend_locked(std::uint64_t ticket, bool by_poll) {
  const auto owner = owner_.find(ticket);
  if (owner == owner_.end()) return {};
  const auto it = entries_.find(owner->second);
  if (by_poll && capturing_) polled_[owner->second].push_back(ticket);
  owner_.erase(owner);
  std::vector<std::uint64_t>& left = it->second.tickets;
  std::erase(left, ticket);
  if (!left.empty()) return {};
  std::vector<Ready> ready;
  ready.push_back(Ready{std::move(it->second.done), ""});
  entries_.erase(it);
  return ready;
}

std::vector<Session::Ready> Session::fail_all_locked(const std::string& cause) {
  if (broken_.empty()) {
    broken_ = "prism: the emulation failed: " + cause;
    std::fprintf(stderr, "%s\n", broken_.c_str());
    std::fflush(stderr);
  }
  std::vector<Ready> failed;
  for (auto& [id, entry] : entries_) {
    failed.push_back(Ready{std::move(entry.done), "prism: " + entry.what + " failed: " + cause});
  }
  entries_.clear();
  owner_.clear();
  polled_.clear();
  return failed;
}

void Session::run(std::vector<Ready>& ready) {
  for (Ready& r : ready) r.done(r.error);
  ready.clear();
}

// Polls while ops are outstanding, so that futures nobody waits for with
// Work::wait (DDP's reducer waits on futures) still complete, and so that
// the coordinator keeps hearing from this rank while it computes. Neither
// call waits for the coordinator, and the thread waits for its messages
// without the lock: the main thread must never wait for the lock while the
// coordinator waits for the other live ranks' clocks (that real time would
// count as this rank's).
//
// The thread waits for the coordinator's messages even when no op is
// outstanding (looking again every kIdleWait): enter() polls once itself,
// and the answer wakes the thread, so entering an op costs it one wake-up,
// not two. When the coordinator says nothing can complete for a while (the
// other ranks virtual, the op long), the thread sleeps until then instead of
// polling, or until the main thread enters an op (which may complete
// sooner): polls and wake-ups on the rank's own core are what an op in
// flight costs its compute (docs/torch-backend.md, "The progress thread").
void Session::progress_loop() {
  using Clock = std::chrono::steady_clock;
  std::unique_lock lock(mu_);
  Clock::time_point next = Clock::now();  // when the next poll is due
  for (;;) {
    if (stop_) return;
    if (!broken_.empty()) {  // nothing left to watch
      work_cv_.wait(lock, [this] { return stop_; });
      return;
    }
    const bool outstanding = !owner_.empty();
    const bool due = outstanding && Clock::now() >= next;
    std::uint64_t ticket = PRISM_NO_TICKET;
    const prism_status s =
        due ? prism_poll(client_, &ticket) : prism_poll_arrived(client_, &ticket);
    if (due) next = Clock::now() + poll_;
    const std::int64_t quiet_us = s == PRISM_OK && outstanding ? prism_poll_quiet_us(client_) : 0;
    if (quiet_us > 0) {
      const std::chrono::microseconds most = kMaxQuiet;
      next = std::max(next, Clock::now() + std::min(std::chrono::microseconds(quiet_us), most));
    }
    std::vector<Ready> ready;
    if (s != PRISM_OK) {
      ready = fail_all_locked(prism_last_error(client_));
    } else if (ticket != PRISM_NO_TICKET) {
      ready = spend_locked(ticket, true);
    }
    if (ticket != PRISM_NO_TICKET || !ready.empty()) {
      lock.unlock();
      run(ready);
      lock.lock();
      continue;  // a completion may have others right behind it
    }
    if (quiet_us > 0) {
      // No message is due before the quiet time: wait on the main thread.
      const std::uint64_t entered = entered_;
      work_cv_.wait_until(lock, next, [&] { return stop_ || entered_ != entered; });
      if (entered_ != entered) next = Clock::now();  // the new op may complete sooner
      continue;
    }
    prism_client* const c = client_;  // closed only after this thread ends
    const Clock::time_point until = outstanding ? next : Clock::now() + kIdleWait;
    lock.unlock();
    const auto left = std::chrono::duration_cast<std::chrono::microseconds>(until - Clock::now());
    if (left.count() > 0) prism_wait_message(c, left.count());
    lock.lock();
  }
}

bool Session::marker(int code, std::int32_t value) {
  std::lock_guard lock(mu_);
  if (client_ == nullptr && broken_.empty()) return false;
  check_usable_locked();
  polled_.clear();  // entries nobody waited for before the marker
  if (prism_marker(client_, code, value) != PRISM_OK) {
    throw_locked("iteration marker " + std::to_string(code));
  }
  return true;
}

prism_stats Session::stats() {
  std::lock_guard lock(mu_);
  prism_stats s{};
  if (client_ != nullptr) prism_get_stats(client_, &s);
  return s;
}

std::int64_t Session::now() {
  std::lock_guard lock(mu_);
  return client_ != nullptr ? prism_now(client_) : 0;
}

void Session::shutdown(std::int32_t exit_code, bool run_pending) {
  if (pid_ != 0 && pid_ != ::getpid()) {
    // A forked child (a DataLoader worker) shares the parent's socket but not
    // its thread: it must neither say goodbye for the parent nor join.
    (void)progress_.release();
    return;
  }
  {
    std::lock_guard lock(mu_);
    if (client_ == nullptr) return;
    stop_ = true;
  }
  work_cv_.notify_all();
  if (progress_ && progress_->joinable()) progress_->join();
  std::vector<Ready> pending;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, entry] : entries_) {
      if (run_pending) {
        pending.push_back(Ready{std::move(entry.done), "prism: " + entry.what +
                                                           " had not completed when the "
                                                           "process exited"});
      } else {
        // Python is finalized: a Done would touch tensors and futures whose
        // owners are gone. Leaking them at exit is harmless.
        new Done(std::move(entry.done));
      }
    }
    entries_.clear();
    owner_.clear();
    prism_close(client_, exit_code);
    client_ = nullptr;
    broken_ = "prism: the connection to the coordinator was closed at exit";
  }
  run(pending);
}

}  // namespace prism::torch_shim
