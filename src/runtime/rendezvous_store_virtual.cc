// StoreState: the answers for virtual ranks (rendezvous_store_keys.h has the
// key patterns, docs/rendezvous.md the rules and their limits).
#include "runtime/rendezvous_store_state.h"

#include <algorithm>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "util/hash.h"

namespace prism::runtime {

using store_keys::KeyInfo;
using store_keys::KeyKind;
using tcpstore::Bytes;

namespace {

bool is_decimal(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool is_nccl_id(KeyKind k) {
  return k == KeyKind::kNcclId || k == KeyKind::kNcclP2pId || k == KeyKind::kNcclRootId;
}

std::string describe_id(const KeyInfo& info) {
  switch (info.kind) {
    case KeyKind::kNcclP2pId:
      return fmt::format("the NCCL unique id of a send/recv pair, published by its group rank {}",
                         info.rank);
    case KeyKind::kNcclRootId:
      return fmt::format("the NCCL unique id of root {} (ncclCommInitRankScalable)", info.rank);
    default:
      return "the NCCL unique id published by its group rank 0";
  }
}

}  // namespace

const std::vector<std::int32_t>* StoreState::members(const std::string& group) const {
  if (auto it = groups_.find(group); it != groups_.end()) return &it->second;
  return group == "0" ? &world_ : nullptr;
}

// The global rank that would SET an NCCL id key; nullopt when the group's
// ranks are unknown.
std::optional<std::int32_t> StoreState::publisher(const KeyInfo& info,
                                                  std::span<const KeyInfo> asked) {
  const auto* m = members(info.group);
  if (!m) return std::nullopt;
  const auto n = static_cast<std::int32_t>(m->size());
  std::int32_t group_rank = info.rank;
  if (info.kind == KeyKind::kNcclRootId) {
    // ProcessGroupNCCL waits for and gets every root's key at once: a query
    // that names roots 0..k-1 tells that there are k.
    std::int32_t& roots = root_counts_[info.root_prefix];
    std::set<std::int32_t> named;
    for (const KeyInfo& other : asked) {
      if (other.kind == KeyKind::kNcclRootId && other.root_prefix == info.root_prefix) {
        named.insert(other.rank);
      }
    }
    const auto k = static_cast<std::int32_t>(named.size());
    if (k > 0 && *named.rbegin() == k - 1) roots = std::max(roots, k);
    if (roots == 0) roots = (n + options_.nccl_ranks_per_root - 1) / options_.nccl_ranks_per_root;
    if (info.rank >= roots || roots > n) return std::nullopt;
    group_rank = store_keys::scalable_root_rank(info.rank, roots, n);
  }
  if (group_rank < 0 || group_rank >= n) return std::nullopt;
  return (*m)[static_cast<std::size_t>(group_rank)];
}

void StoreState::note_comm_id(const std::string& key) {
  if (!options_.on_comm_id) return;
  const KeyInfo info = store_keys::classify(key);
  if (!is_nccl_id(info.kind)) return;
  const auto* m = members(info.group);
  if (!m) return;
  const auto n = static_cast<std::int32_t>(m->size());
  const Bytes& value = kv_.at(key);
  switch (info.kind) {
    case KeyKind::kNcclId:
      options_.on_comm_id(fnv1a(value.data(), value.size()), *m);
      return;
    case KeyKind::kNcclP2pId:
      // ProcessGroupNCCL's pair communicator: the lower group rank is its rank 0.
      if (info.rank < 0 || info.peer >= n) return;
      options_.on_comm_id(
          fnv1a(value.data(), value.size()),
          {(*m)[static_cast<std::size_t>(info.rank)], (*m)[static_cast<std::size_t>(info.peer)]});
      return;
    default: {  // kNcclRootId: the drop-in hashes every root's id, in root order
      const auto roots = root_counts_.find(info.root_prefix);
      if (roots == root_counts_.end() || roots->second <= 0) return;
      std::uint64_t h = kFnvOffset;
      for (std::int32_t r = 0; r < roots->second; ++r) {
        const auto it = kv_.find(fmt::format("{}UniqueNCCLID:{}", info.root_prefix, r));
        if (it == kv_.end()) return;  // not every root's yet
        h = fnv1a(it->second.data(), it->second.size(), h);
      }
      options_.on_comm_id(h, *m);
      return;
    }
  }
}

bool StoreState::admit(ClientId id, const std::string& key, const KeyInfo& info,
                       std::span<const KeyInfo> asked, bool writing, StoreEffects& out) {
  Client& c = clients_.at(id);
  if (is_nccl_id(info.kind)) {
    const std::optional<std::int32_t> pub = publisher(info, asked);
    if (options_.on_trace) {
      out.notes.push_back(fmt::format(
          "rendezvous store: {} {} '{}': {} of group '{}' ({}), publisher {}, {}", who(id),
          writing ? "publishes" : "asks for", key, describe_id(info), info.group,
          members(info.group) ? fmt::format("{} ranks", members(info.group)->size()) : "undeclared",
          pub ? fmt::format("rank {} ({})", *pub, real_.contains(*pub) ? "real" : "virtual")
              : "unknown",
          kv_.contains(key) ? "present" : "absent"));
    }
    if (writing) {
      if (pub && real_.contains(*pub)) c.rank = *pub;
    } else if (!kv_.contains(key)) {
      settle_absent(key, info, asked, out);
    }
    return true;
  }
  if (info.kind == KeyKind::kObject) {
    if (!writing && !kv_.contains(key)) settle_object(key, info, out);
    return true;
  }
  if (info.kind != KeyKind::kGlooAddress) return true;

  // Gloo connects every pair of members through their published addresses:
  // one virtual member and the group cannot form.
  const auto* m = members(info.group);
  std::string reason;
  if (m) {
    if (writing && info.rank < static_cast<std::int32_t>(m->size())) {
      c.rank = (*m)[static_cast<std::size_t>(info.rank)];
    }
    std::int32_t culprit = -1;
    for (std::size_t r = 0; r < m->size(); ++r) {
      if (real_.contains((*m)[r])) continue;
      if (culprit < 0 || static_cast<std::int32_t>(r) == info.rank) {
        culprit = static_cast<std::int32_t>(r);
      }
    }
    if (culprit < 0) return true;
    reason =
        fmt::format("its rank {} (global rank {}) is virtual and cannot publish a Gloo address",
                    culprit, (*m)[static_cast<std::size_t>(culprit)]);
  } else {
    if (info.rank < static_cast<std::int32_t>(real_.size())) return true;
    reason = fmt::format(
        "it has more than {} ranks but only {} ranks are real, so some are virtual and cannot "
        "publish a Gloo address",
        info.rank, real_.size());
  }
  const std::string rank = c.rank >= 0 ? fmt::format("rank {}", c.rank) : "a real rank";
  fail(id,
       fmt::format("{} created a Gloo process group that PrismLLM cannot interpose (group '{}', "
                   "store key '{}'): {}. Run it with PrismLLM's backend (`prism emulate` maps "
                   "backend='gloo' to it for init_process_group and new_group), or create the "
                   "group with dist.new_group instead of constructing ProcessGroupGloo directly; "
                   "closing the connection",
                   rank, info.group, key, reason),
       out);
  return false;
}

// A real rank asks for an absent NCCL id: publish it when its publisher is
// virtual, leave it to a real publisher, or time the wait when nobody knows.
void StoreState::settle_absent(const std::string& key, const KeyInfo& info,
                               std::span<const KeyInfo> asked, StoreEffects& out) {
  auto pub = publisher(info, asked);
  if (!pub) {
    if (options_.unknown_publisher_timeout.count() > 0 && !reported_.contains(key)) {
      unplaced_.try_emplace(key, now_ + options_.unknown_publisher_timeout);
    }
    return;
  }
  if (real_.contains(*pub)) return;
  put(key, store_keys::synthesized_id(key), out);
}

// prism_torch's objects (docs/torch-backend.md, "Objects"): a real sender
// SETs its own; a virtual sender's come from StoreOptions::object_answer,
// asked again every kObjectRetry while pending. A failure is the key's
// value, so that the reader raises it at once, naming its call and rank,
// and an error of the store, which ends the run whatever the reader does.
// A gathered object not known yet is the key's value only: the reader
// keeps its own object in that slot.
void StoreState::settle_object(const std::string& key, const KeyInfo& info, StoreEffects& out) {
  if (real_.contains(info.rank) || !options_.object_answer) return;
  ObjectAnswer a = options_.object_answer(info.object_key);
  if (a.state == ObjectAnswer::State::kPending) {
    if (pending_objects_.empty()) objects_retry_at_ = now_ + kObjectRetry;
    pending_objects_.insert(key);
    return;
  }
  pending_objects_.erase(key);
  if (options_.on_trace) {
    out.notes.push_back(
        fmt::format("rendezvous store: object '{}' of virtual rank {}: {}", key, info.rank,
                    a.state == ObjectAnswer::State::kReady ? fmt::format("{} bytes", a.bytes.size())
                                                           : a.error));
  }
  if (a.state == ObjectAnswer::State::kFailed || a.state == ObjectAnswer::State::kUnknown) {
    if (a.state == ObjectAnswer::State::kFailed) out.errors.push_back(a.error);
    const std::string_view tag = a.state == ObjectAnswer::State::kFailed ? "PRISMERR" : "PRISMUNK";
    a.bytes.assign(tag.begin(), tag.end());
    a.bytes.insert(a.bytes.end(), a.error.begin(), a.error.end());
  }
  put(key, std::move(a.bytes), out);
}

void StoreState::declare_group(ClientId id, const std::string& group, const Bytes& value,
                               StoreEffects& out) {
  const std::string text(value.begin(), value.end());
  if (options_.on_trace) {
    out.notes.push_back(fmt::format("rendezvous store: {} declares group '{}' as '{}'", who(id),
                                    group, text.substr(0, 200)));
  }
  auto report = [&](const std::string& what) {
    out.errors.push_back(
        fmt::format("rendezvous store: {}: declaration of process group '{}' as "
                    "'{}': {}; ignored",
                    who(id), group, text, what));
  };
  auto ranks = store_keys::parse_members(text);
  if (!ranks.is_ok()) return report(ranks.status().message());
  StoreOptions probe;
  probe.world_size = options_.world_size;
  probe.groups[group] = *ranks;
  if (Status s = validate_options(probe); !s.is_ok()) return report(s.message());
  auto [it, inserted] = groups_.try_emplace(group, *ranks);
  if (!inserted) {
    if (it->second != *ranks) {
      report(fmt::format("it was declared as '{}' before", fmt::join(it->second, ",")));
    }
    return;
  }
  reevaluate(out);
}

// A group became known: the keys real ranks wait for may now have a virtual
// publisher (answer them) or be a doomed Gloo group (refuse it).
void StoreState::reevaluate(StoreEffects& out) {
  std::vector<std::pair<ClientId, std::string>> asks;
  for (const auto& [key, ids] : waiters_) {
    for (ClientId id : ids) asks.emplace_back(id, key);
  }
  for (const auto& [id, c] : clients_) {
    if (!c.pending) continue;
    for (const auto& key : c.pending->keys) asks.emplace_back(id, key);
  }
  for (const auto& [id, key] : asks) {
    if (clients_.contains(id) && !kv_.contains(key)) {
      admit(id, key, store_keys::classify(key), {}, /*writing=*/false, out);
    }
  }
}

std::int64_t StoreState::virtual_share(const KeyInfo& info) const {
  const auto virtual_ranks =
      static_cast<std::int64_t>(options_.world_size) - static_cast<std::int64_t>(real_.size());
  if (info.kind == KeyKind::kWorkerCounter) return virtual_ranks;
  if (info.kind != KeyKind::kBarrierCounter) return 0;
  // 1.13 names the barrier by a group count and counts the whole world; 2.x
  // names it by the group, and counts only its members when the group
  // synchronizes locally (a hashed, non-numeric name).
  if (is_decimal(info.barrier_name)) return virtual_ranks;
  auto g = groups_.find(info.barrier_name);
  if (g == groups_.end()) return virtual_ranks;
  return std::count_if(g->second.begin(), g->second.end(),
                       [&](std::int32_t r) { return !real_.contains(r); });
}

std::optional<StoreClock::time_point> StoreState::next_deadline() const {
  std::optional<StoreClock::time_point> next;
  if (!pending_objects_.empty()) next = objects_retry_at_;
  for (const auto& [key, at] : unplaced_) {
    if (!next || at < *next) next = at;
  }
  return next;
}

void StoreState::advance(StoreClock::time_point now, StoreEffects& out) {
  now_ = now;
  if (!pending_objects_.empty() && now >= objects_retry_at_) {
    for (const std::string& key : std::exchange(pending_objects_, {})) {
      if (!kv_.contains(key)) settle_object(key, store_keys::classify(key), out);
    }
  }
  for (auto it = unplaced_.begin(); it != unplaced_.end();) {
    if (it->second > now) {
      ++it;
      continue;
    }
    const std::string key = it->first;
    it = unplaced_.erase(it);
    const bool awaited =
        waiters_.contains(key) || std::ranges::any_of(clients_, [&](const auto& entry) {
          return entry.second.blocked_on(key);
        });
    if (!awaited || kv_.contains(key)) continue;
    reported_.insert(key);
    const KeyInfo info = store_keys::classify(key);
    out.errors.push_back(fmt::format(
        "rendezvous store: real ranks have waited {} s for store key '{}', {} of process group "
        "'{}', but PrismLLM does not know that group's ranks, so it cannot tell whether that "
        "rank is virtual: declare them (SET 'prism/group/{}' = '0,2,4', the group's global ranks "
        "in order, before its first collective; or StoreOptions::groups)",
        options_.unknown_publisher_timeout.count() / 1000.0, key, describe_id(info), info.group,
        info.group));
  }
}

}  // namespace prism::runtime
