#include "shim/nccl/submit.h"

#include <atomic>
#include <mutex>
#include <vector>

#include "shim/nccl/shim.h"

namespace prism::nccl {
namespace {

struct GpuOp {
  cudaStream_t stream;
  prism_op op;
  std::vector<Copy> copies;
};

// The calling thread's open group. The vectors keep their capacity, so a
// steady program allocates nothing here after its first groups.
struct Group {
  int depth = 0;
  std::uint32_t id = 0;
  std::vector<std::uint64_t> tickets;  // host path: entered, waited at the end
  std::vector<Copy> copies;            // host path: run after those waits
  std::vector<GpuOp> gpu;              // GPU path: held at the end
  std::vector<prism_op> scratch;       // one stream's ops, for Device::hold
  std::vector<Copy> scratch_copies;    // and their copies
};
thread_local Group t_group;

std::atomic<std::uint32_t> g_next_group{1};

// Enters `op` and returns its ticket. Call with the client lock held.
ncclResult_t enter(const char* fn, Shim& shim, const prism_op& op, std::uint64_t* ticket) {
  prism_client* c = shim.connected();
  if (c == nullptr) return fail(ncclInvalidUsage, fn, "the coordinator's client was closed (exit)");
  const prism_status s = prism_enter(c, &op, ticket);
  if (s != PRISM_OK) return shim.client_error(fn, s);
  shim.entered(*ticket, op.comm);
  return ncclSuccess;
}

// Waits for each ticket. Call with the client lock held.
ncclResult_t wait_all(const char* fn, Shim& shim, const std::vector<std::uint64_t>& tickets) {
  for (const std::uint64_t ticket : tickets) {
    if (!shim.take_spent(ticket)) {  // else completed by now, seen by the GPU path
      prism_client* c = shim.connected();
      const prism_status s = c != nullptr ? prism_wait(c, ticket) : PRISM_ERR_PROTOCOL;
      // A failure breaks the client: the other ops cannot complete either.
      if (s != PRISM_OK) return shim.client_error(fn, s);
    }
    shim.completed(ticket);  // NCCL's memory for the op, owed
  }
  return ncclSuccess;
}

// Host path for ops[0..n): enters them all, waits for each, then copies.
ncclResult_t enter_and_wait(const char* fn, Shim& shim, const prism_op* ops, std::size_t n,
                            std::span<const Copy> copies) {
  thread_local std::vector<std::uint64_t> tickets;
  tickets.clear();
  {
    std::lock_guard lock(shim.client_mu());
    for (std::size_t i = 0; i < n; ++i) {
      std::uint64_t ticket = 0;
      PRISM_NCCL_TRY(enter(fn, shim, ops[i], &ticket));
      tickets.push_back(ticket);
    }
    PRISM_NCCL_TRY(wait_all(fn, shim, tickets));
  }
  PRISM_NCCL_TRY(shim.reserve_owed(fn));  // NCCL's memory, in the call as NCCL allocates it
  return shim.device().copy(fn, copies);
}

// Holds the group's GPU ops, one hold per stream in order of first use.
ncclResult_t hold_group(const char* fn, Shim& shim, Group& g) {
  ncclResult_t result = ncclSuccess;
  for (std::size_t i = 0; i < g.gpu.size(); ++i) {
    const cudaStream_t s = g.gpu[i].stream;
    if (s == nullptr) continue;  // taken by an earlier stream's hold
    g.scratch.clear();
    g.scratch_copies.clear();
    for (std::size_t j = i; j < g.gpu.size(); ++j) {
      if (g.gpu[j].stream != s) continue;
      g.scratch.push_back(g.gpu[j].op);
      g.scratch_copies.insert(g.scratch_copies.end(), g.gpu[j].copies.begin(),
                              g.gpu[j].copies.end());
      g.gpu[j].stream = nullptr;
    }
    bool held = false;
    ncclResult_t r =
        shim.device().hold(fn, s, g.scratch.data(), g.scratch.size(), g.scratch_copies, &held);
    if (r == ncclSuccess && !held)
      r = enter_and_wait(fn, shim, g.scratch.data(), g.scratch.size(), g.scratch_copies);
    if (result == ncclSuccess) result = r;
  }
  g.gpu.clear();
  return result;
}

}  // namespace

ncclResult_t submit(const char* fn, ncclComm* comm, prism_op op, cudaStream_t stream,
                    std::vector<Copy> copies) {
  Shim& shim = Shim::get();
  // NCCL's memory owed for ops completed so far, as NCCL allocates it: in
  // the application's NCCL call (an allocation that fails fails the call).
  PRISM_NCCL_TRY(shim.reserve_owed(fn));
  Group& g = t_group;
  op.comm = comm->handle;
  op.stream = shim.stream_id(stream);
  op.group = g.depth > 0 ? g.id : 0;
  if (shim.device().holds_on(stream)) {
    if (g.depth > 0) {
      g.gpu.push_back(GpuOp{stream, op, std::move(copies)});
      return ncclSuccess;
    }
    bool held = false;
    PRISM_NCCL_TRY(shim.device().hold(fn, stream, &op, 1, copies, &held));
    if (held) return ncclSuccess;
  }
  if (g.depth == 0) return enter_and_wait(fn, shim, &op, 1, copies);
  std::lock_guard lock(shim.client_mu());
  std::uint64_t ticket = 0;
  PRISM_NCCL_TRY(enter(fn, shim, op, &ticket));
  g.tickets.push_back(ticket);
  g.copies.insert(g.copies.end(), copies.begin(), copies.end());
  return ncclSuccess;
}

ncclResult_t group_start(const char*) {
  Group& g = t_group;
  if (g.depth++ == 0) {
    g.id = g_next_group.fetch_add(1);
    if (g.id == 0) g.id = g_next_group.fetch_add(1);  // 0 means "no group"
  }
  return ncclSuccess;
}

ncclResult_t group_end(const char* fn) {
  Group& g = t_group;
  if (g.depth == 0) return fail(ncclInvalidUsage, fn, "no ncclGroupStart is open on this thread");
  if (--g.depth > 0) return ncclSuccess;
  Shim& shim = Shim::get();
  ncclResult_t result = g.gpu.empty() ? ncclSuccess : hold_group(fn, shim, g);
  if (!g.tickets.empty()) {
    ncclResult_t r = ncclSuccess;
    {
      std::lock_guard lock(shim.client_mu());
      r = wait_all(fn, shim, g.tickets);
    }
    if (r == ncclSuccess) r = shim.reserve_owed(fn);
    if (r == ncclSuccess) r = shim.device().copy(fn, g.copies);
    if (result == ncclSuccess) result = r;
    g.tickets.clear();
  }
  g.copies.clear();
  return result;
}

}  // namespace prism::nccl
