// StoreState: decoding, dispatch and the key-value store as torch keeps it.
// The virtual-rank rules are in rendezvous_store_virtual.cc.
#include "runtime/rendezvous_store_state.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <numeric>
#include <utility>

#include <fmt/format.h>

namespace prism::runtime {

using tcpstore::Bytes;
using tcpstore::Op;

namespace {

// torch parses a counter with std::stoll: leading blanks, a sign, digits,
// and whatever follows ignored.
std::optional<std::int64_t> parse_counter(const Bytes& v) {
  std::size_t i = 0;
  while (i < v.size() && std::isspace(v[i])) ++i;
  if (i < v.size() && v[i] == '+') ++i;
  const char* begin = reinterpret_cast<const char*>(v.data()) + i;
  const char* end = reinterpret_cast<const char*>(v.data()) + v.size();
  std::int64_t n = 0;
  auto [ptr, ec] = std::from_chars(begin, end, n);
  if (ec != std::errc()) return std::nullopt;
  return n;
}

std::vector<store_keys::KeyInfo> classify_all(const std::vector<std::string>& keys) {
  std::vector<store_keys::KeyInfo> infos;
  infos.reserve(keys.size());
  for (const auto& key : keys) infos.push_back(store_keys::classify(key));
  return infos;
}

}  // namespace

Status validate_options(const StoreOptions& o) {
  if (o.world_size <= 0) {
    return Status::invalid_argument(fmt::format("world size {} is not positive", o.world_size));
  }
  auto check = [&](const std::vector<std::int32_t>& ranks, const std::string& what) -> Status {
    std::set<std::int32_t> seen;
    for (std::int32_t r : ranks) {
      if (r < 0 || r >= o.world_size) {
        return Status::invalid_argument(
            fmt::format("{}: rank {} is outside the world of {} ranks", what, r, o.world_size));
      }
      if (!seen.insert(r).second) {
        return Status::invalid_argument(fmt::format("{}: rank {} appears twice", what, r));
      }
    }
    return Status::ok();
  };
  PRISM_RETURN_IF_ERROR(check(o.real_ranks, "real ranks"));
  for (const auto& [name, ranks] : o.groups) {
    PRISM_RETURN_IF_ERROR(check(ranks, fmt::format("process group '{}'", name)));
  }
  if (o.nccl_ranks_per_root <= 0) {
    return Status::invalid_argument(
        fmt::format("NCCL ranks per root {} is not positive", o.nccl_ranks_per_root));
  }
  return Status::ok();
}

StoreState::StoreState(const StoreOptions& options)
    : options_(options),
      real_(options.real_ranks.begin(), options.real_ranks.end()),
      world_(static_cast<std::size_t>(options.world_size)),
      groups_(options.groups) {
  std::iota(world_.begin(), world_.end(), 0);
}

void StoreState::connect(ClientId id, std::string peer) {
  clients_[id].peer = std::move(peer);
}

void StoreState::disconnect(ClientId id) {
  auto it = clients_.find(id);
  if (it == clients_.end()) return;
  stop_waiting(id, it->second);
  for (auto& [key, ids] : watchers_) std::erase(ids, id);
  std::erase(runnable_, id);
  clients_.erase(it);
}

void StoreState::receive(ClientId id, std::span<const std::uint8_t> bytes,
                         StoreClock::time_point now, StoreEffects& out) {
  now_ = now;
  auto it = clients_.find(id);
  if (it == clients_.end()) return;
  it->second.in.insert(it->second.in.end(), bytes.begin(), bytes.end());
  runnable_.push_back(id);
  pump(out);
}

void StoreState::pump(StoreEffects& out) {
  while (!runnable_.empty()) {
    ClientId id = runnable_.front();
    runnable_.pop_front();
    run(id, out);
  }
}

// Decodes and handles the client's queries until it blocks or runs dry.
void StoreState::run(ClientId id, StoreEffects& out) {
  while (true) {
    auto it = clients_.find(id);
    if (it == clients_.end()) return;
    Client& c = it->second;
    if (c.pending) return;
    std::span<const std::uint8_t> data(c.in.data() + c.in_pos, c.in.size() - c.in_pos);
    if (c.dialect == tcpstore::Dialect::kUnknown) c.dialect = tcpstore::detect(data);
    if (c.dialect == tcpstore::Dialect::kUnknown) return;
    auto d = tcpstore::decode(c.dialect, data, /*first=*/c.offset == 0, limits_);
    if (d.kind == tcpstore::Decoded::Kind::kNeedMore) {
      c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(c.in_pos));
      c.in_pos = 0;
      return;
    }
    if (d.kind == tcpstore::Decoded::Kind::kError) {
      drop(id, fmt::format("byte {}: {}; closing the connection", c.offset, d.error), out);
      return;
    }
    c.in_pos += d.consumed;
    c.offset += d.consumed;
    handle(id, d.query, out);
  }
}

void StoreState::handle(ClientId id, Query& q, StoreEffects& out) {
  Bytes reply;
  switch (q.op) {
    case Op::kValidate:
      return;
    case Op::kPing:
      tcpstore::put_u32(reply, q.word);
      break;
    case Op::kGetNumKeys:
      tcpstore::put_i64(reply, static_cast<std::int64_t>(kv_.size()));
      break;
    case Op::kList:
      tcpstore::put_i64(reply, static_cast<std::int64_t>(kv_.size()));
      for (const auto& [key, value] : kv_) tcpstore::put_string(reply, key);
      break;
    case Op::kCancelWait:
      stop_waiting(id, clients_.at(id));
      tcpstore::put_u8(reply, tcpstore::kWaitCanceled);
      break;
    case Op::kWatchKey:
      watchers_[q.keys[0]].push_back(id);
      tcpstore::put_u8(reply, tcpstore::kKeyCallbackRegistered);
      break;
    case Op::kDeleteKey: {
      auto it = kv_.find(q.keys[0]);
      const bool existed = it != kv_.end();
      if (existed) {
        Bytes old = std::move(it->second);
        kv_.erase(it);
        notify(q.keys[0], tcpstore::kKeyDeleted, old, {}, out);
      }
      tcpstore::put_i64(reply, existed ? 1 : 0);
      break;
    }
    case Op::kCompareSet:
      return handle_compare_set(id, q, out);
    case Op::kAdd:
      return handle_add(id, q, out);
    case Op::kQueuePush:
    case Op::kQueuePop:
    case Op::kQueueLen:
      return handle_queue(id, q, out);
    case Op::kSet:
    case Op::kMultiSet:
    case Op::kAppend:
      return handle_write(id, q, out);
    case Op::kGet:
    case Op::kMultiGet:
    case Op::kCheck:
    case Op::kWait:
      return handle_read(id, q, out);
  }
  out.sends.emplace_back(id, std::move(reply));
}

void StoreState::handle_write(ClientId id, Query& q, StoreEffects& out) {
  const auto infos = classify_all(q.keys);
  for (std::size_t i = 0; i < q.keys.size(); ++i) {
    if (!admit(id, q.keys[i], infos[i], infos, /*writing=*/true, out)) return;
  }
  for (std::size_t i = 0; i < q.keys.size(); ++i) {
    const std::string& key = q.keys[i];
    if (infos[i].kind == store_keys::KeyKind::kGroupDeclaration && q.op != Op::kAppend) {
      declare_group(id, infos[i].group, q.values[i], out);
    }
    if (infos[i].kind == store_keys::KeyKind::kObject && options_.on_object) {
      options_.on_object(infos[i].object_key, q.values[i]);
    }
    if (q.op != Op::kAppend || !kv_.contains(key)) {
      put(key, std::move(q.values[i]), out);
      continue;
    }
    Bytes& v = kv_[key];
    v.insert(v.end(), q.values[i].begin(), q.values[i].end());
    notify(key, tcpstore::kKeyAppended, {}, q.values[i], out);
    appeared(key, out);
  }
}

void StoreState::handle_read(ClientId id, Query& q, StoreEffects& out) {
  const auto infos = classify_all(q.keys);
  for (std::size_t i = 0; i < q.keys.size(); ++i) {
    if (!admit(id, q.keys[i], infos[i], infos, /*writing=*/false, out)) return;
  }
  Client& c = clients_.at(id);
  if (q.op == Op::kCheck) {
    const bool ready =
        std::all_of(q.keys.begin(), q.keys.end(), [&](const std::string& k) { return present(k); });
    Bytes reply;
    tcpstore::put_u8(reply, ready ? tcpstore::kCheckReady : tcpstore::kCheckNotReady);
    out.sends.emplace_back(id, std::move(reply));
    return;
  }
  if (q.op == Op::kWait) return handle_wait(id, q, out);
  c.pending = std::move(q);
  try_answer(id, c, out);
  if (c.pending) trace_waiting(id, c.pending->keys, infos, out);
}

void StoreState::handle_wait(ClientId id, const Query& q, StoreEffects& out) {
  Client& c = clients_.at(id);
  stop_waiting(id, c);  // a new WAIT replaces one the client gave up on
  for (const auto& key : q.keys) {
    if (!present(key)) c.waiting.insert(key);
  }
  if (c.waiting.empty()) {
    out.sends.emplace_back(id, Bytes{tcpstore::kStopWaiting});
    return;
  }
  for (const auto& key : c.waiting) waiters_[key].push_back(id);
  trace_waiting(id, q.keys, classify_all(q.keys), out);
}

void StoreState::trace_waiting(ClientId id, const std::vector<std::string>& keys,
                               std::span<const store_keys::KeyInfo> infos,
                               StoreEffects& out) const {
  if (!options_.on_trace) return;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (present(keys[i]) || infos[i].kind == store_keys::KeyKind::kBarrierCounter) continue;
    out.notes.push_back(
        fmt::format("rendezvous store: {} waits for absent key '{}'", who(id), keys[i]));
  }
}

void StoreState::handle_compare_set(ClientId id, const Query& q, StoreEffects& out) {
  const std::string& key = q.keys[0];
  const Bytes& expected = q.values[0];
  const Bytes& desired = q.values[1];
  Bytes reply;
  auto it = kv_.find(key);
  if (it == kv_.end()) {
    // torch answers `expected` when the key is absent and expected is not
    // empty, without setting anything.
    tcpstore::put_bytes(reply, expected.empty() ? desired : expected);
    out.sends.emplace_back(id, std::move(reply));
    if (expected.empty()) put(key, desired, out);
    return;
  }
  if (it->second == expected) {
    Bytes old = it->second;
    it->second = desired;
    notify(key, tcpstore::kKeyUpdated, old, desired, out);
    appeared(key, out);
  }
  tcpstore::put_bytes(reply, it->second);
  out.sends.emplace_back(id, std::move(reply));
}

void StoreState::handle_add(ClientId id, const Query& q, StoreEffects& out) {
  const std::string& key = q.keys[0];
  std::int64_t value = q.delta;
  auto it = kv_.find(key);
  if (it != kv_.end()) {
    auto base = parse_counter(it->second);
    if (!base) {
      fail(id,
           fmt::format("ADD {} to key '{}', whose value '{}' is not an integer; closing the "
                       "connection",
                       q.delta, key, std::string(it->second.begin(), it->second.end())),
           out);
      return;
    }
    if (__builtin_add_overflow(value, *base, &value)) {
      fail(id,
           fmt::format("ADD {} to key '{}', whose value is {}: the sum is outside the 64-bit "
                       "integers; closing the connection",
                       q.delta, key, *base),
           out);
      return;
    }
  } else {
    const std::int64_t share = virtual_share(store_keys::classify(key));
    if (__builtin_add_overflow(value, share, &value)) {
      fail(id,
           fmt::format("ADD {} to key '{}', which counts {} virtual ranks: the sum is outside the "
                       "64-bit integers; closing the connection",
                       q.delta, key, share),
           out);
      return;
    }
  }
  Bytes reply;
  tcpstore::put_i64(reply, value);
  out.sends.emplace_back(id, std::move(reply));
  put(key, tcpstore::bytes_of(std::to_string(value)), out);
}

void StoreState::handle_queue(ClientId id, const Query& q, StoreEffects& out) {
  const std::string& key = q.keys[0];
  Bytes reply;
  if (q.op == Op::kQueuePush) {
    queues_[key].push_back(q.values[0]);
    // torch wakes one waiter per push: one pop per pushed item.
    auto w = waiters_.find(key);
    if (w == waiters_.end() || w->second.empty()) return;
    ClientId waiter = w->second.front();
    w->second.erase(w->second.begin());
    Client& c = clients_.at(waiter);
    c.waiting.erase(key);
    if (c.waiting.empty()) out.sends.emplace_back(waiter, Bytes{tcpstore::kStopWaiting});
    return;
  }
  auto& queue = queues_[key];
  tcpstore::put_i64(reply, static_cast<std::int64_t>(queue.size()));
  if (q.op == Op::kQueuePop && !queue.empty()) {
    tcpstore::put_bytes(reply, queue.front());
    queue.pop_front();
  }
  out.sends.emplace_back(id, std::move(reply));
}

void StoreState::put(const std::string& key, Bytes value, StoreEffects& out) {
  auto [it, created] = kv_.try_emplace(key);
  const Bytes old = std::exchange(it->second, std::move(value));
  notify(key, created ? tcpstore::kKeyCreated : tcpstore::kKeyUpdated, old, it->second, out);
  appeared(key, out);
}

bool StoreState::present(const std::string& key) const {
  if (kv_.contains(key)) return true;
  auto q = queues_.find(key);
  return q != queues_.end() && !q->second.empty();
}

// `key` has a value now: release WAITs and blocked GETs that needed it.
void StoreState::appeared(const std::string& key, StoreEffects& out) {
  unplaced_.erase(key);
  note_comm_id(key);
  if (auto w = waiters_.find(key); w != waiters_.end()) {
    std::vector<ClientId> ids = std::move(w->second);
    waiters_.erase(w);
    for (ClientId waiter : ids) {
      Client& c = clients_.at(waiter);
      if (c.waiting.erase(key) && c.waiting.empty()) {
        out.sends.emplace_back(waiter, Bytes{tcpstore::kStopWaiting});
      }
    }
  }
  for (auto& [id, c] : clients_) {
    if (c.blocked_on(key)) try_answer(id, c, out);
  }
}

// Answers the client's blocked GET or MULTI_GET when every key is there.
void StoreState::try_answer(ClientId id, Client& c, StoreEffects& out) {
  for (const auto& key : c.pending->keys) {
    if (!kv_.contains(key)) return;
  }
  Bytes reply;
  for (const auto& key : c.pending->keys) tcpstore::put_bytes(reply, kv_.at(key));
  out.sends.emplace_back(id, std::move(reply));
  c.pending.reset();
  if (c.in_pos < c.in.size()) runnable_.push_back(id);
}

void StoreState::notify(const std::string& key, std::uint8_t type, const Bytes& old_value,
                        const Bytes& new_value, StoreEffects& out) {
  auto w = watchers_.find(key);
  if (w == watchers_.end()) return;
  for (ClientId watcher : w->second) {
    Bytes msg;
    tcpstore::put_u8(msg, type);
    tcpstore::put_string(msg, key);
    tcpstore::put_bytes(msg, old_value);
    tcpstore::put_bytes(msg, new_value);
    out.sends.emplace_back(watcher, std::move(msg));
  }
}

void StoreState::stop_waiting(ClientId id, Client& c) {
  for (const auto& key : c.waiting) {
    auto w = waiters_.find(key);
    if (w == waiters_.end()) continue;
    std::erase(w->second, id);
    if (w->second.empty()) waiters_.erase(w);
  }
  c.waiting.clear();
}

std::string StoreState::who(ClientId id) const {
  auto it = clients_.find(id);
  if (it == clients_.end()) return fmt::format("client {}", id);
  const Client& c = it->second;
  return fmt::format("client {} ({}, {})", id, c.peer, tcpstore::dialect_name(c.dialect));
}

void StoreState::fail(ClientId id, const std::string& what, StoreEffects& out) {
  out.errors.push_back(fmt::format("rendezvous store: {}: {}", who(id), what));
  out.closes.push_back(id);
  disconnect(id);
}

void StoreState::drop(ClientId id, const std::string& what, StoreEffects& out) {
  out.dropped.push_back(fmt::format("rendezvous store: {}: {}", who(id), what));
  out.closes.push_back(id);
  disconnect(id);
}

}  // namespace prism::runtime
