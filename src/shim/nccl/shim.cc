#include "shim/nccl/shim.h"

#include <errno.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <system_error>
#include <thread>

namespace prism::nccl {
namespace {

// The environment variable `name` as a non-negative int. When it is unset,
// *out keeps its default unless the variable is `required`; a failure
// leaves a message that names the variable in *why.
bool env_int(const char* name, bool required, int* out, std::string* why) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') {
    if (required) {
      *why = fmt::format(
          "{} is not set: `prism emulate` sets RANK, WORLD_SIZE and LOCAL_RANK for each real "
          "rank",
          name);
    }
    return !required;
  }
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || x < 0 || x > std::numeric_limits<int>::max()) {
    *why = fmt::format("{}='{}' is not a non-negative integer", name, v);
    return false;
  }
  *out = static_cast<int>(x);
  return true;
}

ncclResult_t result_of(prism_status s) {
  switch (s) {
    case PRISM_OK:
      return ncclSuccess;
    case PRISM_ERR_ARGUMENT:
      return ncclInternalError;  // the drop-in checks what it passes on
    case PRISM_ERR_CONNECT:
      return ncclSystemError;
    case PRISM_ERR_REJECTED:
      return ncclInvalidUsage;  // the job has no such communicator or op
    case PRISM_ERR_PROTOCOL:
    case PRISM_ERR_ABORTED:
      return ncclRemoteError;
  }
  return ncclInternalError;
}

}  // namespace

Shim& Shim::get() {
  // Never destroyed: the exit hook and late calls from other libraries'
  // destructors may still need it.
  static Shim* shim = new Shim;
  return *shim;
}

Shim::Shim() {
  const char* host = std::getenv("PRISM_NCCL_HOST_PATH");
  if (host == nullptr || std::strcmp(host, "1") != 0) device_ = make_cuda_device();
  if (!device_) device_ = make_host_device();
}

ncclResult_t Shim::connect(const char* fn, prism_client** out) {
  if (client_ != nullptr) {
    if (::getpid() != client_pid_.load()) {
      return fail(ncclInvalidUsage, fn,
                  "this process was forked from the rank that joined the emulation; only that "
                  "process can use NCCL");
    }
    *out = client_;
    return ncclSuccess;
  }
  const char* address = std::getenv("PRISM_COORDINATOR");
  if (address == nullptr || *address == '\0') {
    return fail(ncclInvalidUsage, fn,
                "PRISM_COORDINATOR is not set: run the program under `prism emulate`");
  }
  int rank = 0, world = 0, local = 0, timeout_ms = 0;
  std::string why;
  if (!env_int("RANK", true, &rank, &why) || !env_int("WORLD_SIZE", true, &world, &why) ||
      !env_int("LOCAL_RANK", false, &local, &why) ||
      !env_int("PRISM_TIMEOUT_MS", false, &timeout_ms, &why)) {
    return fail(ncclInvalidUsage, fn, why);
  }
  prism_client* c = nullptr;
  const prism_status s =
      prism_connect(nullptr, rank, world, local, program_invocation_name, timeout_ms, &c);
  if (s != PRISM_OK) {
    const std::string message = c != nullptr ? prism_last_error(c) : "out of memory";
    prism_close(c, 1);
    // A wrong address (an argument error here, unlike on later calls) is
    // the launch's mistake, as a refused rank is.
    const ncclResult_t code = s == PRISM_ERR_ARGUMENT ? ncclInvalidUsage : result_of(s);
    return failf(code, fn, "cannot join the emulation at {} as rank {} of {}: {}", address, rank,
                 world, message);
  }
  client_ = c;
  client_pid_.store(::getpid());
  local_rank_ = local;
  if (!exit_hook_) {
    // Registered after the client exists, so it runs before the static
    // destructors of anything constructed earlier.
    exit_hook_ = std::atexit(&Shim::at_exit) == 0;
  }
  *out = client_;
  return ncclSuccess;
}

void Shim::at_exit() {
  Shim& s = get();
  // A child forked after the connect shares the socket but is not the rank:
  // its exit must not say goodbye for it, nor touch locks and threads that
  // only the parent has.
  if (::getpid() != s.client_pid_.load()) return;
  s.device_->stop();
  std::lock_guard lock(s.client_mu_);
  if (s.client_ == nullptr) return;
  // The goodbye: the coordinator counts this rank as finished. The exit
  // code the process ends with is not known here; its launcher sees it.
  prism_close(s.client_, 0);
  s.client_ = nullptr;
}

ncclResult_t Shim::client_error(const char* fn, prism_status s) {
  const std::string message = client_ != nullptr ? prism_last_error(client_) : "not connected";
  const ncclResult_t code = result_of(s);
  // Past a refusal, an abort or a broken connection the client is unusable:
  // every communicator has failed.
  if (s != PRISM_ERR_ARGUMENT) break_all(code, fmt::format("{}: {}", fn, message));
  if (s == PRISM_ERR_PROTOCOL) end_if_left_running(fmt::format("{}: {}", fn, message));
  return fail(code, fn, message);
}

void Shim::end_if_left_running(const std::string& message) {
  if (::getpid() != client_pid_.load() || gone_armed_.exchange(true)) return;
  int seconds = kGoneExitSeconds;
  std::string why;
  if (!env_int("PRISM_NCCL_GONE_EXIT_S", false, &seconds, &why)) {
    fmt::print(stderr, "PrismLLM NCCL: warning: {}; {} s kept\n", why, kGoneExitSeconds);
    seconds = kGoneExitSeconds;
  }
  if (seconds == 0) return;
  // Formatted now: at the end, only write(2) and _exit, which take no lock
  // that a stuck thread may hold.
  const std::string line = fmt::format(
      "PrismLLM NCCL: error: the emulation is gone ({}), and this process still ran {} s later: "
      "ending it with exit status 1 (PRISM_NCCL_GONE_EXIT_S)\n",
      message, seconds);
  try {
    std::thread([line, seconds] {
      std::this_thread::sleep_for(std::chrono::seconds(seconds));
      const ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
      (void)n;
      ::_exit(1);
    }).detach();
  } catch (const std::system_error&) {
    // No thread to be had: the process ends as the program makes it.
  }
}

bool Shim::take_spent(std::uint64_t ticket) {
  for (std::size_t i = 0; i < spent_.size(); ++i) {
    if (spent_[i] != ticket) continue;
    spent_[i] = spent_.back();
    spent_.pop_back();
    return true;
  }
  return false;
}

void Shim::break_all(ncclResult_t code, const std::string& message) {
  std::lock_guard lock(state_mu_);
  if (broken_.empty()) broken_ = message;
  for (auto& [handle, comm] : comms_) {
    ncclResult_t none = ncclSuccess;
    comm->async_error.compare_exchange_strong(none, code);
  }
}

std::string Shim::async_message() {
  std::lock_guard lock(state_mu_);
  return broken_;
}

void Shim::add_comm(ncclComm* c) {
  std::lock_guard lock(state_mu_);
  comms_[c->handle] = c;
}

void Shim::remove_comm(ncclComm* c) {
  std::lock_guard lock(state_mu_);
  comms_.erase(c->handle);
}

void Shim::set_async_error(std::uint32_t handle, ncclResult_t code, const std::string& message) {
  std::lock_guard lock(state_mu_);
  if (broken_.empty()) broken_ = message;
  const auto it = comms_.find(handle);
  if (it == comms_.end()) return;
  ncclResult_t none = ncclSuccess;
  it->second->async_error.compare_exchange_strong(none, code);
}

std::uint32_t Shim::next_comm_handle() {
  std::lock_guard lock(state_mu_);
  return next_comm_++;
}

std::uint16_t Shim::stream_id(cudaStream_t s) {
  if (s == nullptr) return 0;
  std::lock_guard lock(state_mu_);
  for (const auto& [stream, id] : streams_)
    if (stream == s) return id;
  const std::uint16_t id = next_stream_;
  next_stream_ = id == std::numeric_limits<std::uint16_t>::max() ? 1 : id + 1;
  // Entry id-1 holds stream `id`: after wrapping, a new stream takes over
  // the slot of the one that had its id, so the table stays bounded.
  if (streams_.size() < id) {
    streams_.emplace_back(s, id);
  } else {
    streams_[id - 1] = {s, id};
  }
  return id;
}

void Shim::remember_alloc(void* p, std::size_t bytes, bool on_device) {
  std::lock_guard lock(state_mu_);
  allocs_[p] = {bytes, on_device};
}

bool Shim::forget_alloc(void* p, std::size_t* bytes, bool* on_device) {
  std::lock_guard lock(state_mu_);
  const auto it = allocs_.find(p);
  if (it == allocs_.end()) return false;
  *bytes = it->second.first;
  *on_device = it->second.second;
  allocs_.erase(it);
  return true;
}

void Shim::entered(std::uint64_t ticket, std::uint32_t comm) {
  op_comm_[ticket] = comm;
}

void Shim::completed(std::uint64_t ticket) {
  const auto it = op_comm_.find(ticket);
  if (it == op_comm_.end()) return;
  const std::uint32_t comm = it->second;
  op_comm_.erase(it);
  const std::int64_t bytes = client_ != nullptr ? prism_take_nccl_bytes(client_, ticket) : 0;
  if (bytes <= 0) return;
  std::lock_guard lock(state_mu_);
  if (!comms_.contains(comm)) return;  // destroyed meanwhile: NCCL freed it
  NcclReserve& n = nccl_[comm];
  n.planned += bytes;
  n.owed += bytes;
  owed_any_.store(true);
}

ncclResult_t Shim::reserve_owed(const char* fn) {
  if (!owed_any_.exchange(false)) return ncclSuccess;
  std::vector<std::pair<std::uint32_t, std::int64_t>> owed;
  {
    std::lock_guard lock(state_mu_);
    for (auto& [comm, n] : nccl_) {
      if (n.owed > 0) owed.emplace_back(comm, std::exchange(n.owed, 0));
    }
  }
  for (const auto& [comm, bytes] : owed) {
    void* p = nullptr;
    const ncclResult_t r = device_->nccl_reserve(fn, bytes, &p);
    if (r != ncclSuccess) {
      set_async_error(comm, r, last_error());
      return r;
    }
    if (p == nullptr) continue;  // no CUDA context: nothing to allocate
    std::lock_guard lock(state_mu_);
    if (const auto it = nccl_.find(comm); it != nccl_.end()) {
      it->second.allocated += bytes;
      it->second.blocks.push_back(p);
    } else {
      device_->nccl_release(p);  // destroyed meanwhile (another thread)
    }
  }
  return ncclSuccess;
}

void Shim::release_nccl_memory(std::uint32_t comm) {
  NcclReserve n;
  {
    std::lock_guard lock(state_mu_);
    const auto it = nccl_.find(comm);
    if (it == nccl_.end()) return;
    n = std::move(it->second);
    nccl_.erase(it);
  }
  for (void* p : n.blocks) device_->nccl_release(p);
}

void Shim::nccl_memory(std::int64_t* planned, std::int64_t* allocated) {
  std::lock_guard lock(state_mu_);
  *planned = *allocated = 0;
  for (const auto& [comm, n] : nccl_) {
    *planned += n.planned;
    *allocated += n.allocated;
  }
}

}  // namespace prism::nccl
