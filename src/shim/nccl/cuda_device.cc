// The CUDA device: the GPU path (device.h). Untested without a GPU: the
// build and the tests here exercise the host path only.
//
// A hold is one cuStreamWaitValue32 on the stream, between two events:
//   [before] wait(flag >= target) [after]
// Each stream has one 32-bit flag in host-mapped memory and a count of
// holds enqueued; hold k waits for flag >= k. The progress thread
// - enters a hold's ops when its `before` event completes (the GPU reached
//   them), and reports the kernel time since the stream's previous hold was
//   released (previous `after` to this `before`) with prism_compute;
// - asks the client what has completed by now (prism_poll: prism_wait_any
//   at now, with the clock running), which also keeps the coordinator
//   hearing from this rank while the host thread is blocked in
//   cudaStreamSynchronize;
// - writes flag = k once hold k and every earlier hold on that stream are
//   complete, so a stream is released in order.
// The host thread only enqueues; it never waits on the coordinator.
// Iteration markers the host sends while a hold is not yet entered wait for
// it (defer_marker): the progress thread sends them between the holds the
// host enqueued before and after them.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "shim/nccl/cuda_driver.h"
#include "shim/nccl/device.h"
#include "shim/nccl/shim.h"

namespace prism::nccl {
namespace {

constexpr std::size_t kMaxStreams = 1024;  // flags in the host-mapped page
constexpr int kDefaultPollUs = 50;         // PRISM_NCCL_POLL_US
constexpr const char* kProgress = "PrismLLM NCCL progress thread";

class CudaDevice final : public Device {
 public:
  CudaDevice(const CudaDriver& d, std::chrono::microseconds poll) : d_(d), poll_(poll) {
    streams_.reserve(kMaxStreams);
  }
  ~CudaDevice() override { stop(); }

  bool holds_on(cudaStream_t stream) override {
    if (stream == nullptr || broken_.load()) return false;
    CUcontext ctx = nullptr;
    return d_.ctx_get_current(&ctx) == CUDA_SUCCESS && ctx != nullptr;
  }
  ncclResult_t hold(const char* fn, cudaStream_t stream, const prism_op* ops, std::size_t n,
                    std::span<const Copy> copies, bool* held) override;
  ncclResult_t copy(const char* fn, std::span<const Copy> copies) override;
  bool defer_marker(int code, int value) override;
  void abandon(std::uint32_t comm) override;
  int cu_device(int fallback) override {
    CUcontext ctx = nullptr;
    CUdevice dev = 0;
    if (d_.ctx_get_current(&ctx) != CUDA_SUCCESS || ctx == nullptr) return fallback;
    return d_.ctx_get_device(&dev) == CUDA_SUCCESS ? static_cast<int>(dev) : fallback;
  }
  ncclResult_t mem_alloc(const char* fn, void** ptr, std::size_t bytes, bool* on_device) override;
  ncclResult_t mem_free(const char* fn, void* ptr, bool on_device) override;
  ncclResult_t nccl_reserve(const char* fn, std::int64_t bytes, void** ptr) override;
  void nccl_release(void* ptr) override;
  void stop() override;

 private:
  struct Stream {
    CUstream stream = nullptr;
    CUcontext ctx = nullptr;
    std::size_t index = 0;         // its flag
    std::uint32_t enqueued = 0;    // holds enqueued (host threads, under mu_)
    std::uint32_t released = 0;    // holds released (progress thread)
    CUevent last_after = nullptr;  // the last entered hold's `after` (progress thread)
  };
  struct Hold {
    std::uint64_t seq = 0;  // 1, 2, ... in enqueue order, over all streams
    Stream* stream = nullptr;
    std::uint32_t target = 0;
    CUevent before = nullptr, after = nullptr;
    std::vector<prism_op> ops;
    std::vector<std::uint64_t> tickets;  // progress thread from here on
    std::size_t remaining = 0;
    bool entered = false, done = false, released = false;
    std::atomic<bool> abandoned{false};
  };
  struct Marker {
    std::uint64_t after = 0;  // the seq of the last hold enqueued before it
    int code = 0, value = 0;
  };

  ncclResult_t cuda_fail(const char* fn, const char* what, CUresult r) {
    return failf(ncclUnhandledCudaError, fn, "{}: {}", what, d_.describe(r));
  }
  // A stream cannot be held: the GPU path goes off for good (ops already
  // held still complete), said once on stderr, and the caller takes the
  // host path.
  ncclResult_t turn_off(const char* fn, const std::string& why, bool* held);
  bool prepare(CUstream s, Stream** out, std::string* why);  // under mu_
  // An unused event of context `ctx` (events belong to one context).
  CUevent take_event(CUcontext ctx);  // under mu_
  void run();
  void step();
  void enter(Hold& h, prism_client* c);
  // Sends the waiting markers that come before hold `seq` (all of them:
  // UINT64_MAX) once the holds before each are entered; false when one
  // still waits, so hold `seq` must not be entered yet.
  bool send_markers_before(std::uint64_t seq, prism_client* c);
  void collect(prism_client* c);
  void release();
  void retire();  // under mu_
  // The client broke or an op failed: every hold completes as failed, so
  // no stream stays held, and later ops take the host path (and fail there).
  void give_up(ncclResult_t code, const std::string& message);

  const CudaDriver d_;
  const std::chrono::microseconds poll_;  // the progress thread's period while holds are out
  std::mutex mu_;                         // below, up to the progress thread's own state
  std::condition_variable cv_;
  std::uint32_t* flags_ = nullptr;  // host-mapped, kMaxStreams of them
  CUdeviceptr flags_dev_ = 0;
  std::vector<Stream> streams_;  // reserved: never reallocates
  std::list<Hold> holds_, spare_;
  std::uint64_t seq_ = 0;        // holds enqueued, over all streams
  std::vector<Marker> markers_;  // deferred, not yet taken by the progress thread
  std::vector<std::pair<CUcontext, CUevent>> events_;  // created, unused
  std::thread thread_;
  bool stopping_ = false;
  std::atomic<bool> broken_{false};

  // The progress thread's own.
  std::vector<Hold*> snapshot_;
  std::vector<Marker> waiting_;  // deferred markers taken from markers_, in order
  std::vector<std::pair<CUcontext, CUevent>> spent_events_;
  std::unordered_set<std::uint64_t> orphans_;  // tickets of abandoned holds
  CUcontext current_ = nullptr;
};

bool CudaDevice::prepare(CUstream s, Stream** out, std::string* why) {
  CUcontext ctx = nullptr;
  d_.ctx_get_current(&ctx);
  if (flags_ == nullptr) {
    void* host = nullptr;
    const std::size_t bytes = kMaxStreams * sizeof(std::uint32_t);
    CUresult r =
        d_.mem_host_alloc(&host, bytes, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
    if (r != CUDA_SUCCESS) {
      *why = "cuMemHostAlloc of the stream flags: " + d_.describe(r);
      return false;
    }
    std::memset(host, 0, bytes);
    r = d_.mem_host_get_device_pointer(&flags_dev_, host, 0);
    if (r != CUDA_SUCCESS) {
      *why = "cuMemHostGetDevicePointer: " + d_.describe(r);
      return false;
    }
    flags_ = static_cast<std::uint32_t*>(host);
  }
  for (Stream& st : streams_) {
    if (st.stream == s && st.ctx == ctx) {
      *out = &st;
      return true;
    }
  }
  if (streams_.size() == kMaxStreams) {
    *why = fmt::format("more than {} CUDA streams carry NCCL operations", kMaxStreams);
    return false;
  }
  Stream& st = streams_.emplace_back();
  st.stream = s;
  st.ctx = ctx;
  st.index = streams_.size() - 1;
  *out = &st;
  return true;
}

ncclResult_t CudaDevice::turn_off(const char* fn, const std::string& why, bool* held) {
  *held = false;
  if (!broken_.exchange(true)) {
    std::fprintf(stderr,
                 "PrismLLM NCCL: %s: %s; from now on NCCL calls wait on the host (the GPU path "
                 "is off)\n",
                 fn, why.c_str());
  }
  return ncclSuccess;
}

CUevent CudaDevice::take_event(CUcontext ctx) {
  for (std::size_t i = events_.size(); i-- > 0;) {
    if (events_[i].first != ctx) continue;
    const CUevent e = events_[i].second;
    events_[i] = events_.back();
    events_.pop_back();
    return e;
  }
  CUevent e = nullptr;
  return d_.event_create(&e, CU_EVENT_DEFAULT) == CUDA_SUCCESS ? e : nullptr;
}

ncclResult_t CudaDevice::hold(const char* fn, cudaStream_t stream, const prism_op* ops,
                              std::size_t n, std::span<const Copy> copies, bool* held) {
  *held = true;
  if (n == 0) return ncclSuccess;
  const CUstream s = reinterpret_cast<CUstream>(stream);
  std::lock_guard lock(mu_);
  Stream* st = nullptr;
  std::string why;
  if (!prepare(s, &st, &why)) return turn_off(fn, why, held);
  if (spare_.empty()) spare_.emplace_back();
  Hold& h = spare_.front();
  h.stream = st;
  h.seq = seq_ + 1;
  h.target = st->enqueued + 1;
  h.before = take_event(st->ctx);
  h.after = take_event(st->ctx);
  h.ops.assign(ops, ops + n);
  h.tickets.clear();
  h.entered = h.done = h.released = false;
  h.abandoned.store(false);
  // Until the wait is enqueued, a failure leaves the stream as it was.
  const auto undo = [&](const std::string& why) {
    if (h.before != nullptr) events_.emplace_back(st->ctx, h.before);
    if (h.after != nullptr) events_.emplace_back(st->ctx, h.after);
    h.before = h.after = nullptr;
    return turn_off(fn, why, held);
  };
  if (h.before == nullptr || h.after == nullptr) return undo("cuEventCreate failed");
  CUresult r = d_.event_record(h.before, s);
  if (r != CUDA_SUCCESS) return undo("cuEventRecord: " + d_.describe(r));
  r = d_.stream_wait_value32(s, flags_dev_ + st->index * sizeof(std::uint32_t), h.target,
                             CU_STREAM_WAIT_VALUE_GEQ);
  if (r != CUDA_SUCCESS) return undo("cuStreamWaitValue32: " + d_.describe(r));
  // The wait is enqueued: from here on the hold must be released some day.
  // The mirrored data lands after it, before `after`: not kernel time.
  ncclResult_t result = ncclSuccess;
  for (const Copy& c : copies) {
    r = d_.memcpy_async(reinterpret_cast<CUdeviceptr>(c.dst), reinterpret_cast<CUdeviceptr>(c.src),
                        c.bytes, s);
    if (r != CUDA_SUCCESS) {
      result = cuda_fail(fn, "cuMemcpyAsync of the mirrored data (docs/nccl-shim.md, \"Data\")", r);
      break;
    }
  }
  if (d_.event_record(h.after, s) != CUDA_SUCCESS) {
    events_.emplace_back(st->ctx, h.after);  // no kernel time before the next hold
    h.after = nullptr;
  }
  st->enqueued = h.target;
  seq_ = h.seq;
  holds_.splice(holds_.end(), spare_, spare_.begin());
  if (!thread_.joinable() && !stopping_) thread_ = std::thread([this] { run(); });
  cv_.notify_one();
  return result;
}

ncclResult_t CudaDevice::copy(const char* fn, std::span<const Copy> copies) {
  CUcontext ctx = nullptr;
  const bool unified = d_.ctx_get_current(&ctx) == CUDA_SUCCESS && ctx != nullptr;
  for (const Copy& c : copies) {
    if (!unified) {
      std::memmove(c.dst, c.src, c.bytes);
      continue;
    }
    const CUresult r = d_.memcpy(reinterpret_cast<CUdeviceptr>(c.dst),
                                 reinterpret_cast<CUdeviceptr>(c.src), c.bytes);
    if (r != CUDA_SUCCESS) return cuda_fail(fn, "cuMemcpy of the mirrored data", r);
  }
  return ncclSuccess;
}

bool CudaDevice::defer_marker(int code, int value) {
  std::lock_guard lock(mu_);
  // Holds not yet retired may not be entered yet (whether they are is the
  // progress thread's to know): the marker waits its turn there.
  if ((holds_.empty() && markers_.empty()) || stopping_) return false;
  markers_.push_back(Marker{seq_, code, value});
  cv_.notify_one();
  return true;
}

void CudaDevice::abandon(std::uint32_t comm) {
  std::lock_guard lock(mu_);
  for (Hold& h : holds_)
    for (const prism_op& op : h.ops)
      if (op.comm == comm) h.abandoned.store(true);
}

void CudaDevice::run() {
  std::unique_lock lk(mu_);
  while (!stopping_) {
    if (holds_.empty() && markers_.empty() && waiting_.empty()) {
      cv_.wait(lk);
      continue;
    }
    snapshot_.clear();
    for (Hold& h : holds_) snapshot_.push_back(&h);
    waiting_.insert(waiting_.end(), markers_.begin(), markers_.end());
    markers_.clear();
    lk.unlock();
    step();
    lk.lock();
    retire();
    cv_.wait_for(lk, poll_, [this] { return stopping_; });
  }
}

void CudaDevice::step() {
  Shim& shim = Shim::get();
  std::lock_guard client(shim.client_mu());
  prism_client* c = shim.connected();
  for (Hold* h : snapshot_) {
    if (h->done) continue;
    if (c == nullptr || h->abandoned.load()) {
      for (const std::uint64_t t : h->tickets) orphans_.insert(t);
      h->done = true;
    } else if (!h->entered && send_markers_before(h->seq, c)) {
      enter(*h, c);
    }
  }
  send_markers_before(UINT64_MAX, c);
  if (c != nullptr) collect(c);
  release();
}

bool CudaDevice::send_markers_before(std::uint64_t seq, prism_client* c) {
  while (!waiting_.empty() && waiting_.front().after < seq) {
    const Marker m = waiting_.front();
    if (c != nullptr) {  // not connected (or no longer): nothing to mark
      const bool ready = std::ranges::all_of(
          snapshot_, [&](const Hold* h) { return h->seq > m.after || h->entered || h->done; });
      if (!ready) return false;
      const prism_status s = prism_marker(c, m.code, m.value);
      if (s != PRISM_OK) {  // the client is unusable: no marker can go out any more
        const ncclResult_t code = Shim::get().client_error(kProgress, s);
        give_up(code, last_error());
        waiting_.clear();
        return true;
      }
    }
    waiting_.erase(waiting_.begin());
  }
  return true;
}

void CudaDevice::enter(Hold& h, prism_client* c) {
  Stream& st = *h.stream;
  if (current_ != st.ctx && d_.ctx_set_current(st.ctx) == CUDA_SUCCESS) current_ = st.ctx;
  const CUresult q = d_.event_query(h.before);
  if (q == CUDA_ERROR_NOT_READY) return;
  if (q != CUDA_SUCCESS) {
    for (const prism_op& op : h.ops)
      Shim::get().set_async_error(op.comm, ncclUnhandledCudaError,
                                  fmt::format("{}: cuEventQuery: {}", kProgress, d_.describe(q)));
    h.done = true;
    return;
  }
  // The stream's kernels since its previous hold was released.
  float ms = 0;
  if (st.last_after != nullptr &&
      d_.event_elapsed_time(&ms, st.last_after, h.before) == CUDA_SUCCESS && ms > 0) {
    prism_compute(c, h.ops[0].stream, static_cast<std::int64_t>(ms * 1e6), "kernels");
  }
  if (st.last_after != nullptr) spent_events_.emplace_back(st.ctx, st.last_after);
  st.last_after = h.after;
  h.after = nullptr;
  spent_events_.emplace_back(st.ctx, h.before);
  h.before = nullptr;
  for (const prism_op& op : h.ops) {
    std::uint64_t ticket = 0;
    const prism_status s = prism_enter(c, &op, &ticket);
    if (s != PRISM_OK) {
      const ncclResult_t code = Shim::get().client_error(kProgress, s);
      give_up(code, last_error());
      return;
    }
    Shim::get().entered(ticket, op.comm);
    h.tickets.push_back(ticket);
  }
  h.entered = true;
  h.remaining = h.ops.size();
}

void CudaDevice::collect(prism_client* c) {
  std::size_t outstanding = 0;
  for (const Hold* h : snapshot_)
    if (h->entered && !h->done) outstanding += h->remaining;
  while (outstanding > 0) {
    std::uint64_t ticket = PRISM_NO_TICKET;
    const prism_status s = prism_poll(c, &ticket);
    if (s != PRISM_OK) {
      const ncclResult_t code = Shim::get().client_error(kProgress, s);
      give_up(code, last_error());
      return;
    }
    if (ticket == PRISM_NO_TICKET) return;  // nothing more has completed by now
    // NCCL's memory for the op: owed, allocated by the application's next
    // NCCL call (Shim::reserve_owed); an abandoned communicator's is dropped.
    Shim::get().completed(ticket);
    if (orphans_.erase(ticket) != 0) continue;
    bool ours = false;
    for (Hold* h : snapshot_) {
      if (!h->entered || h->done || std::ranges::find(h->tickets, ticket) == h->tickets.end())
        continue;
      ours = true;
      --outstanding;
      if (--h->remaining == 0) h->done = true;
      break;
    }
    if (!ours) Shim::get().spent_elsewhere(ticket);  // a host-path group's op
  }
}

void CudaDevice::release() {
  // Holds are in enqueue order, so each stream's come in target order.
  for (Hold* h : snapshot_) {
    Stream& st = *h->stream;
    if (h->released || !h->done || h->target != st.released + 1) continue;
    std::atomic_ref<std::uint32_t>(flags_[st.index]).store(h->target, std::memory_order_release);
    st.released = h->target;
    h->released = true;
  }
}

void CudaDevice::retire() {
  for (const auto& e : spent_events_) events_.push_back(e);
  spent_events_.clear();
  for (auto it = holds_.begin(); it != holds_.end();) {
    const auto next = std::next(it);
    if (it->released) {
      const CUcontext ctx = it->stream->ctx;
      if (it->before != nullptr) events_.emplace_back(ctx, it->before);
      if (it->after != nullptr) events_.emplace_back(ctx, it->after);
      it->before = it->after = nullptr;
      spare_.splice(spare_.begin(), holds_, it);
    }
    it = next;
  }
}

void CudaDevice::give_up(ncclResult_t code, const std::string& message) {
  broken_.store(true);
  for (Hold* h : snapshot_) {
    if (h->done) continue;
    for (const prism_op& op : h->ops) Shim::get().set_async_error(op.comm, code, message);
    h->done = true;
  }
}

void CudaDevice::stop() {
  std::thread progress;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    progress = std::move(thread_);
    // Let every held stream go: a stream that waits forever would hang the
    // driver's teardown at exit.
    if (flags_ != nullptr) {
      for (const Stream& st : streams_)
        std::atomic_ref<std::uint32_t>(flags_[st.index]).store(st.enqueued);
    }
  }
  cv_.notify_all();
  if (progress.joinable()) progress.join();
  // Markers still waiting at exit go out now, in order, before the goodbye.
  std::vector<Marker> left;
  {
    std::lock_guard lock(mu_);
    left = std::move(waiting_);
    left.insert(left.end(), markers_.begin(), markers_.end());
    markers_.clear();
    waiting_.clear();
  }
  if (left.empty()) return;
  Shim& shim = Shim::get();
  std::lock_guard client(shim.client_mu());
  if (prism_client* c = shim.connected()) {
    for (const Marker& m : left) prism_marker(c, m.code, m.value);
  }
}

ncclResult_t CudaDevice::mem_alloc(const char* fn, void** ptr, std::size_t bytes, bool* on_device) {
  CUcontext ctx = nullptr;
  if (d_.ctx_get_current(&ctx) != CUDA_SUCCESS || ctx == nullptr) {
    *on_device = false;
    return host_alloc(fn, ptr, bytes);
  }
  CUdeviceptr p = 0;
  const CUresult r = d_.mem_alloc(&p, bytes);
  if (r != CUDA_SUCCESS) return cuda_fail(fn, "cuMemAlloc", r);
  *ptr = reinterpret_cast<void*>(p);
  *on_device = true;
  return ncclSuccess;
}

ncclResult_t CudaDevice::mem_free(const char* fn, void* ptr, bool on_device) {
  if (!on_device) {
    std::free(ptr);
    return ncclSuccess;
  }
  const CUresult r = d_.mem_free(reinterpret_cast<CUdeviceptr>(ptr));
  return r == CUDA_SUCCESS ? ncclSuccess : cuda_fail(fn, "cuMemFree", r);
}

ncclResult_t CudaDevice::nccl_reserve(const char* fn, std::int64_t bytes, void** ptr) {
  *ptr = nullptr;
  CUcontext ctx = nullptr;
  if (bytes <= 0 || d_.ctx_get_current(&ctx) != CUDA_SUCCESS || ctx == nullptr) return ncclSuccess;
  CUdeviceptr p = 0;
  const CUresult r = d_.mem_alloc(&p, static_cast<std::size_t>(bytes));
  if (r != CUDA_SUCCESS) {
    return failf(ncclUnhandledCudaError, fn,
                 "cuMemAlloc of {} bytes, the device memory NCCL allocates here at full scale "
                 "(docs/nccl-shim.md, \"Memory\"): {}",
                 bytes, d_.describe(r));
  }
  *ptr = reinterpret_cast<void*>(p);
  return ncclSuccess;
}

void CudaDevice::nccl_release(void* ptr) {
  if (ptr != nullptr) d_.mem_free(reinterpret_cast<CUdeviceptr>(ptr));
}

// PRISM_NCCL_POLL_US: 1..100000 microseconds; anything else is said once on
// stderr and the default kept (the drop-in has no caller to fail here).
std::chrono::microseconds poll_period() {
  const char* v = std::getenv("PRISM_NCCL_POLL_US");
  if (v == nullptr || *v == '\0') return std::chrono::microseconds(kDefaultPollUs);
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || x < 1 || x > 100000) {
    std::fprintf(stderr,
                 "PrismLLM NCCL: PRISM_NCCL_POLL_US='%s' is not a whole number of microseconds in "
                 "1..100000; the progress thread polls every %d us\n",
                 v, kDefaultPollUs);
    return std::chrono::microseconds(kDefaultPollUs);
  }
  return std::chrono::microseconds(x);
}

}  // namespace

std::unique_ptr<Device> make_cuda_device() {
  CudaDriver d;
  if (!d.load()) return nullptr;
  return std::make_unique<CudaDevice>(d, poll_period());
}

}  // namespace prism::nccl
