#include "runtime/comm_ids.h"

#include <utility>

namespace prism::runtime {

void CommIds::record(std::uint64_t id_hash, std::vector<std::int32_t> members) {
  {
    std::lock_guard lock(mu_);
    members_[id_hash] = std::move(members);
  }
  recorded_.notify_all();
}

std::vector<std::int32_t> CommIds::members(std::uint64_t id_hash, std::chrono::milliseconds wait) {
  std::unique_lock lock(mu_);
  recorded_.wait_for(lock, wait, [&] { return members_.contains(id_hash); });
  const auto it = members_.find(id_hash);
  return it == members_.end() ? std::vector<std::int32_t>{} : it->second;
}

std::vector<std::int32_t> CommIds::members_of(std::uint64_t id_hash, int nranks, int position,
                                              std::int32_t rank) {
  std::vector<std::int32_t> m = members(id_hash, kCommIdWait);
  const auto at = static_cast<std::size_t>(position);
  if (std::ssize(m) != nranks || position < 0 || at >= m.size() || m[at] != rank) return {};
  return m;
}

}  // namespace prism::runtime
