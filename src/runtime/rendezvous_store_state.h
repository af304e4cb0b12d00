// StoreState: what the rendezvous store knows and answers, without sockets.
//
// The transport (rendezvous_store.cc) hands it each client's bytes as they
// arrive; it decodes the queries (tcpstore_protocol.h), keeps the keys, the
// queues and who waits for what, applies the virtual-rank rules
// (rendezvous_store_keys.h), and says what to send, whom to close and which
// errors to report. A client blocked in GET or MULTI_GET has its later bytes
// held until the answer goes out, so answers stay in query order; a WAIT does
// not block (torch's CANCEL_WAIT must get through). Time comes in as an
// argument, so the same calls give the same effects.
//
// Single-threaded: the caller serializes every call.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "runtime/rendezvous_store.h"
#include "runtime/rendezvous_store_keys.h"
#include "runtime/tcpstore_protocol.h"
#include "util/status.h"

namespace prism::runtime {

using StoreClock = std::chrono::steady_clock;
using ClientId = std::uint64_t;
// How often an object that StoreOptions::object_answer said is pending is
// asked for again.
inline constexpr std::chrono::milliseconds kObjectRetry{20};

// What one call asks of the transport, in order.
struct StoreEffects {
  std::vector<std::pair<ClientId, tcpstore::Bytes>> sends;
  std::vector<ClientId> closes;  // after the sends; no disconnect() needed
  std::vector<std::string> errors;
  // Clients closed for bytes that are not TCPStore's protocol (a stranger on
  // the port): named once each, not errors of the run.
  std::vector<std::string> dropped;
  // StoreOptions::on_trace's lines; only when it is set.
  std::vector<std::string> notes;
};

// The options' own consistency: world size, ranks in range and unique.
Status validate_options(const StoreOptions& options);

class StoreState {
 public:
  explicit StoreState(const StoreOptions& options);  // validated options

  // `peer` names the client in errors ("127.0.0.1:50312").
  void connect(ClientId id, std::string peer);
  void receive(ClientId id, std::span<const std::uint8_t> bytes, StoreClock::time_point now,
               StoreEffects& out);
  // The connection is gone; forgets its waits. Unknown ids are ignored.
  void disconnect(ClientId id);
  // When advance() has something to do; nullopt: never.
  std::optional<StoreClock::time_point> next_deadline() const;
  void advance(StoreClock::time_point now, StoreEffects& out);

 private:
  struct Client {
    std::string peer;
    tcpstore::Dialect dialect = tcpstore::Dialect::kUnknown;
    tcpstore::Bytes in;
    std::size_t in_pos = 0;                  // bytes of `in` already decoded
    std::uint64_t offset = 0;                // stream offset of in[in_pos]; 0 until the first query
    std::optional<tcpstore::Query> pending;  // GET or MULTI_GET short of keys
    std::set<std::string> waiting;           // WAIT's keys still absent
    std::int32_t rank = -1;                  // global rank, once a key tells it

    // Whether a blocked GET or MULTI_GET waits for `key`.
    bool blocked_on(const std::string& key) const {
      return pending && std::ranges::find(pending->keys, key) != pending->keys.end();
    }
  };
  using Query = tcpstore::Query;

  void run(ClientId id, StoreEffects& out);
  void pump(StoreEffects& out);
  void handle(ClientId id, Query& q, StoreEffects& out);
  void handle_read(ClientId id, Query& q, StoreEffects& out);
  void handle_write(ClientId id, Query& q, StoreEffects& out);
  void handle_compare_set(ClientId id, const Query& q, StoreEffects& out);
  void handle_add(ClientId id, const Query& q, StoreEffects& out);
  void handle_queue(ClientId id, const Query& q, StoreEffects& out);
  void handle_wait(ClientId id, const Query& q, StoreEffects& out);
  // StoreOptions::on_trace's line for each of `keys` still absent (not a
  // barrier's) that the client now waits for.
  void trace_waiting(ClientId id, const std::vector<std::string>& keys,
                     std::span<const store_keys::KeyInfo> infos, StoreEffects& out) const;

  // Virtual-rank rules for a key a client touches; false when the client was
  // refused (and closed). `asked` holds every key of the query that touches
  // it, classified (empty when no query does).
  bool admit(ClientId id, const std::string& key, const store_keys::KeyInfo& info,
             std::span<const store_keys::KeyInfo> asked, bool writing, StoreEffects& out);
  void settle_absent(const std::string& key, const store_keys::KeyInfo& info,
                     std::span<const store_keys::KeyInfo> asked, StoreEffects& out);
  // An object a virtual rank sends: answered, failed, or asked again later.
  void settle_object(const std::string& key, const store_keys::KeyInfo& info, StoreEffects& out);
  // The group's global ranks in group-rank order; null when unknown.
  const std::vector<std::int32_t>* members(const std::string& group) const;
  std::optional<std::int32_t> publisher(const store_keys::KeyInfo& info,
                                        std::span<const store_keys::KeyInfo> asked);
  void declare_group(ClientId id, const std::string& group, const tcpstore::Bytes& value,
                     StoreEffects& out);
  void reevaluate(StoreEffects& out);
  std::int64_t virtual_share(const store_keys::KeyInfo& info) const;

  void put(const std::string& key, tcpstore::Bytes value, StoreEffects& out);
  void appeared(const std::string& key, StoreEffects& out);
  // StoreOptions::on_comm_id for the communicator whose NCCL id `key` holds
  // (or completes), when its group's ranks are known.
  void note_comm_id(const std::string& key);
  bool present(const std::string& key) const;
  void try_answer(ClientId id, Client& c, StoreEffects& out);
  void notify(const std::string& key, std::uint8_t type, const tcpstore::Bytes& old_value,
              const tcpstore::Bytes& new_value, StoreEffects& out);
  void stop_waiting(ClientId id, Client& c);
  void fail(ClientId id, const std::string& what, StoreEffects& out);
  void drop(ClientId id, const std::string& what, StoreEffects& out);
  std::string who(ClientId id) const;

  StoreOptions options_;
  std::set<std::int32_t> real_;
  std::vector<std::int32_t> world_;  // every global rank: the default group "0"
  tcpstore::Limits limits_;
  StoreClock::time_point now_{};

  std::map<ClientId, Client> clients_;
  std::map<std::string, tcpstore::Bytes> kv_;
  std::map<std::string, std::deque<tcpstore::Bytes>> queues_;
  std::map<std::string, std::vector<ClientId>> waiters_;   // WAIT, in arrival order
  std::map<std::string, std::vector<ClientId>> watchers_;  // 1.13's WATCH_KEY
  std::map<std::string, std::vector<std::int32_t>> groups_;
  std::map<std::string, std::int32_t> root_counts_;         // scalable ids: roots per communicator
  std::map<std::string, StoreClock::time_point> unplaced_;  // id keys with no known publisher
  std::set<std::string> pending_objects_;                   // object keys asked again soon
  StoreClock::time_point objects_retry_at_{};               // when
  std::set<std::string> reported_;
  std::deque<ClientId> runnable_;
};

}  // namespace prism::runtime
