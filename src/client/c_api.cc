// The C ABI of include/prism/client.h over client::Client: decode and check
// the arguments, call, translate the Status (client/c_status.h). No
// exception leaves here.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <new>
#include <optional>
#include <string>

#include "client/c_status.h"
#include "client/client.h"
#include "prism/client.h"
#include "wire/protocol.h"

struct prism_client {
  std::unique_ptr<prism::client::Client> client;  // null when connect failed
  std::string last_error;
};

static_assert(PRISM_NO_LIMIT == prism::wire::kNoLimit);

namespace {

using prism::Status;
using prism::client::c_status_of;

prism_status done(prism_client* c, const Status& s) {
  if (s.is_ok()) return PRISM_OK;
  c->last_error = s.message();
  return c_status_of(s);
}

prism_status argument_error(prism_client* c, std::string why) {
  if (c != nullptr) c->last_error = std::move(why);
  return PRISM_ERR_ARGUMENT;
}

// The client, or null with an error set: c is null or its connect failed.
prism::client::Client* usable(prism_client* c) {
  if (c == nullptr) return nullptr;
  if (!c->client) {
    if (c->last_error.empty()) c->last_error = "not connected";
    return nullptr;
  }
  return c->client.get();
}

// The calls that may hand out a ticket (wait_any, poll, arrived): `call`
// runs on the usable client; *ticket is its ticket or PRISM_NO_TICKET.
// `what` names the C function in the null-ticket error.
template <typename Call>
prism_status ticket_or_none(prism_client* c, uint64_t* ticket, const char* what, Call call) {
  prism::client::Client* cl = usable(c);
  if (cl == nullptr) return PRISM_ERR_ARGUMENT;
  if (ticket == nullptr) return argument_error(c, std::string(what) + ": null ticket");
  prism::Result<std::optional<std::uint64_t>> r = call(*cl);
  if (!r.is_ok()) return done(c, r.status());
  *ticket = r.value().value_or(PRISM_NO_TICKET);
  return PRISM_OK;
}

}  // namespace

extern "C" {

prism_status prism_connect(const char* address, int32_t rank, int32_t world_size,
                           int32_t local_rank, const char* program, int32_t timeout_ms,
                           prism_client** out) noexcept {
  if (out == nullptr) return PRISM_ERR_ARGUMENT;
  *out = new (std::nothrow) prism_client;
  prism_client* c = *out;
  if (c == nullptr) return PRISM_ERR_CONNECT;
  try {
    const char* where = address != nullptr ? address : std::getenv("PRISM_COORDINATOR");
    if (where == nullptr)
      return argument_error(c, "no coordinator address: pass one or set PRISM_COORDINATOR");
    prism::Result<prism::wire::Address> a = prism::wire::parse_address(where);
    if (!a.is_ok()) return argument_error(c, a.status().message());
    if (world_size < 1 || rank < 0 || rank >= world_size || local_rank < 0) {
      return argument_error(c, "rank " + std::to_string(rank) + " of world size " +
                                   std::to_string(world_size) + " (local rank " +
                                   std::to_string(local_rank) + ") is not a rank of the job");
    }
    if (timeout_ms < 0) return argument_error(c, "timeout_ms must not be negative");
    const char* secret = std::getenv("PRISM_SECRET");
    const prism::client::Client::Identity who{rank, world_size, local_rank,
                                              program != nullptr ? program : "",
                                              secret != nullptr ? secret : ""};
    bool opened = false;
    prism::Result<std::unique_ptr<prism::client::Client>> r = prism::client::Client::connect(
        a.value(), who, std::chrono::milliseconds(timeout_ms > 0 ? timeout_ms : 60000), &opened);
    if (!r.is_ok()) {
      c->last_error = r.status().message();
      return c_status_of(r.status(), opened);
    }
    c->client = std::move(r).value();
    return PRISM_OK;
  } catch (const std::exception& e) {
    c->last_error = e.what();
    return PRISM_ERR_CONNECT;
  }
}

prism_status prism_comm_init(prism_client* c, uint32_t comm, int32_t nranks, int32_t rank_in_comm,
                             const int32_t* members, uint64_t id_hash) noexcept {
  prism::client::Client* cl = usable(c);
  if (cl == nullptr) return PRISM_ERR_ARGUMENT;
  try {
    std::vector<int32_t> list;
    if (members != nullptr && nranks > 0) list.assign(members, members + nranks);
    return done(c, cl->comm_init(comm, nranks, rank_in_comm, std::move(list), id_hash));
  } catch (const std::exception& e) {
    return argument_error(c, e.what());
  }
}

prism_status prism_comm_split(prism_client* c, uint32_t parent, int32_t color, int32_t key,
                              uint32_t comm, int32_t* nranks, int32_t* rank_in_comm,
                              int32_t* members, int32_t max_members) noexcept {
  prism::client::Client* cl = usable(c);
  if (cl == nullptr) return PRISM_ERR_ARGUMENT;
  if (nranks == nullptr || rank_in_comm == nullptr)
    return argument_error(c, "prism_comm_split: null nranks or rank_in_comm");
  try {
    prism::Result<prism::wire::CommInfo> info = cl->comm_split(parent, comm, color, key);
    if (!info.is_ok()) return done(c, info.status());
    const auto& m = info.value().members;
    if (members != nullptr && std::ssize(m) > max_members) {
      return argument_error(c, "prism_comm_split: communicator " + std::to_string(comm) + " has " +
                                   std::to_string(m.size()) + " members, over max_members " +
                                   std::to_string(max_members));
    }
    *nranks = static_cast<int32_t>(m.size());
    *rank_in_comm = info.value().rank_in_comm;
    if (members != nullptr) std::copy(m.begin(), m.end(), members);
    return PRISM_OK;
  } catch (const std::exception& e) {
    return argument_error(c, e.what());
  }
}

prism_status prism_enter(prism_client* c, const prism_op* op, uint64_t* ticket) noexcept {
  prism::client::Client* cl = usable(c);
  if (cl == nullptr) return PRISM_ERR_ARGUMENT;
  if (op == nullptr || ticket == nullptr)
    return argument_error(c, "prism_enter: null op or ticket");
  if (op->code > PRISM_RECV)
    return argument_error(c, "prism_enter: unknown op code " + std::to_string(op->code));
  if (op->dtype > PRISM_INT64)
    return argument_error(c, "prism_enter: unknown dtype " + std::to_string(op->dtype));
  prism::wire::Op w;
  w.comm = op->comm;
  w.stream = op->stream;
  w.code = static_cast<prism::wire::OpCode>(op->code);
  w.dtype = static_cast<prism::DType>(op->dtype);
  w.bytes = op->bytes;
  w.peer = op->peer;
  w.tag = op->tag;
  w.group = op->group;
  prism::Result<std::uint64_t> t = cl->enter(w);
  if (!t.is_ok()) return done(c, t.status());
  *ticket = t.value();
  return PRISM_OK;
}

prism_status prism_test(prism_client* c, uint64_t ticket, int* completed) noexcept {
  prism::client::Client* cl = usable(c);
  if (cl == nullptr) return PRISM_ERR_ARGUMENT;
  if (completed == nullptr) return argument_error(c, "prism_test: null done");
  prism::Result<bool> r = cl->test(ticket);
  if (!r.is_ok()) return done(c, r.status());
  *completed = r.value() ? 1 : 0;
  return PRISM_OK;
}

prism_status prism_wait(prism_client* c, uint64_t ticket) noexcept {
  prism::client::Client* cl = usable(c);
  if (cl == nullptr) return PRISM_ERR_ARGUMENT;
  return done(c, cl->wait(ticket));
}

prism_status prism_waited(prism_client* c, uint64_t ticket) noexcept {
  prism::client::Client* cl = usable(c);
  if (cl == nullptr) return PRISM_ERR_ARGUMENT;
  return done(c, cl->waited(ticket));
}

int prism_capturing(prism_client* c) noexcept {
  return c != nullptr && c->client && c->client->capturing() ? 1 : 0;
}

prism_status prism_wait_any(prism_client* c, int64_t until_ns, uint64_t* ticket) noexcept {
  return ticket_or_none(c, ticket, "prism_wait_any",
                        [&](prism::client::Client& cl) { return cl.wait_any(until_ns); });
}

prism_status prism_poll(prism_client* c, uint64_t* ticket) noexcept {
  return ticket_or_none(c, ticket, "prism_poll",
                        [](prism::client::Client& cl) { return cl.poll(); });
}

prism_status prism_poll_after_enter(prism_client* c, uint64_t* ticket) noexcept {
  return ticket_or_none(c, ticket, "prism_poll_after_enter",
                        [](prism::client::Client& cl) { return cl.poll(/*clock_runs=*/false); });
}

prism_status prism_poll_arrived(prism_client* c, uint64_t* ticket) noexcept {
  return ticket_or_none(c, ticket, "prism_poll_arrived",
                        [](prism::client::Client& cl) { return cl.arrived(); });
}

int64_t prism_poll_quiet_us(prism_client* c) noexcept {
  if (c == nullptr || !c->client) return 0;
  const std::chrono::nanoseconds q = c->client->quiet_for();
  if (q == std::chrono::nanoseconds::max()) return INT64_MAX;
  return std::chrono::duration_cast<std::chrono::microseconds>(q).count();
}

int prism_wait_message(prism_client* c, int64_t timeout_us) noexcept {
  // Touches nothing another thread's call may change (not even last_error).
  if (c == nullptr || !c->client) return 0;
  return c->client->readable(std::chrono::microseconds(timeout_us)) ? 1 : 0;
}

prism_status prism_memory(prism_client* c, int action, uint64_t id, int64_t bytes,
                          uint16_t stream) noexcept {
  prism::client::Client* cl = usable(c);
  if (cl == nullptr) return PRISM_ERR_ARGUMENT;
  if (action != 0 && action != 1)
    return argument_error(
        c, "prism_memory: action " + std::to_string(action) + " is not 0 (alloc) or 1 (free)");
  return done(c, cl->memory(static_cast<prism::wire::MemoryAction>(action), id, bytes, stream));
}

prism_status prism_marker(prism_client* c, int code, int32_t value) noexcept {
  prism::client::Client* cl = usable(c);
  if (cl == nullptr) return PRISM_ERR_ARGUMENT;
  if (code < 0 || code > 3)
    return argument_error(c, "prism_marker: unknown code " + std::to_string(code));
  return done(c, cl->marker(static_cast<prism::wire::MarkerCode>(code), value));
}

prism_status prism_compute(prism_client* c, uint16_t stream, int64_t duration_ns,
                           const char* name) noexcept {
  prism::client::Client* cl = usable(c);
  if (cl == nullptr) return PRISM_ERR_ARGUMENT;
  try {
    return done(c, cl->compute(stream, duration_ns, name != nullptr ? name : ""));
  } catch (const std::exception& e) {
    return argument_error(c, e.what());
  }
}

int64_t prism_take_nccl_bytes(prism_client* c, uint64_t ticket) noexcept {
  return c != nullptr && c->client ? c->client->take_nccl_bytes(ticket) : 0;
}

int64_t prism_now(const prism_client* c) noexcept {
  return c != nullptr && c->client ? c->client->now() : 0;
}

prism_status prism_get_stats(const prism_client* c, prism_stats* out) noexcept {
  if (c == nullptr || !c->client || out == nullptr) return PRISM_ERR_ARGUMENT;
  out->messages = c->client->messages();
  out->overhead_ns = c->client->overhead().count();
  out->late_ns = c->client->late().count();
  return PRISM_OK;
}

prism_status prism_close(prism_client* c, int32_t exit_code) noexcept {
  if (c == nullptr) return PRISM_OK;
  prism_status s = PRISM_OK;
  if (c->client) s = done(c, c->client->close(exit_code));
  delete c;
  return s;
}

const char* prism_last_error(const prism_client* c) noexcept {
  return c != nullptr ? c->last_error.c_str() : "no client";
}

}  // extern "C"
