#include "graph/role_builder.h"

#include <utility>

namespace prism {

RoleBuilder::RoleBuilder(std::string name, std::vector<std::string> streams) {
  role_.name = std::move(name);
  for (const std::string& s : streams) {
    streams_.try_emplace(s, static_cast<int>(role_.streams.size()));
    role_.streams.push_back(s);
  }
}

int RoleBuilder::intern(std::vector<std::string>* table, Index* index, std::string_view s) {
  // absl's own string_view: Debian builds abseil without std::string_view.
  const auto it = index->find(absl::string_view(s.data(), s.size()));
  if (it != index->end()) return it->second;
  const int i = static_cast<int>(table->size());
  index->emplace(s, i);
  table->emplace_back(s);
  return i;
}

int RoleBuilder::add(Op op, std::string_view name) {
  if (!name.empty()) op.name = this->name(name);
  op.deps_begin = op.deps_end = static_cast<std::uint32_t>(role_.deps.size());
  role_.ops.push_back(op);
  return static_cast<int>(role_.ops.size() - 1);
}

void RoleBuilder::add_deps(std::initializer_list<int> deps) {
  for (int d : deps) add_dep(d);
}

void RoleBuilder::add_dep(int dep) {
  // Only the last op's deps may grow: they sit at the end of Role::deps.
  role_.deps.push_back(dep);
  role_.ops.back().deps_end = static_cast<std::uint32_t>(role_.deps.size());
}

int RoleBuilder::compute(int stream, SimTime duration, std::string_view name,
                         std::initializer_list<int> deps) {
  Op op;
  op.kind = OpKind::kCompute;
  op.stream = static_cast<std::uint16_t>(stream);
  op.duration = duration;
  const int i = add(op, name);
  add_deps(deps);
  return i;
}

int RoleBuilder::compute_cost(int stream, const KernelCost& cost, std::string_view name) {
  Op op;
  op.kind = OpKind::kCompute;
  op.stream = static_cast<std::uint16_t>(stream);
  op.cost = add_cost(cost);
  return add(op, name);
}

int RoleBuilder::add_cost(const KernelCost& cost) {
  role_.costs.push_back(cost);
  return static_cast<int>(role_.costs.size() - 1);
}

int RoleBuilder::collective(int stream, int slot, CollectiveKind kind, Bytes bytes, DType dtype,
                            int root, std::string_view name) {
  Op op;
  op.kind = OpKind::kCollective;
  op.stream = static_cast<std::uint16_t>(stream);
  op.ref = slot;
  op.collective = kind;
  op.bytes = bytes;
  op.dtype = dtype;
  op.arg = root;
  return add(op, name);
}

int RoleBuilder::send(int stream, int peer_slot, Bytes bytes, int tag, std::string_view name) {
  Op op;
  op.kind = OpKind::kSend;
  op.stream = static_cast<std::uint16_t>(stream);
  op.ref = peer_slot;
  op.bytes = bytes;
  op.arg = tag;
  return add(op, name);
}

int RoleBuilder::recv(int stream, int peer_slot, Bytes bytes, int tag, std::string_view name) {
  const int i = send(stream, peer_slot, bytes, tag, name);
  role_.ops[i].kind = OpKind::kRecv;
  return i;
}

int RoleBuilder::alloc(int stream, Bytes bytes, std::string_view name) {
  Op op;
  op.kind = OpKind::kAlloc;
  op.stream = static_cast<std::uint16_t>(stream);
  op.bytes = bytes;
  return add(op, name);
}

int RoleBuilder::free(int stream, int alloc_op, std::initializer_list<int> record_streams) {
  std::int32_t mask = 0;
  for (int s : record_streams) mask |= 1 << s;
  return free_masked(stream, alloc_op, mask);
}

int RoleBuilder::free_masked(int stream, int alloc_op, std::int32_t record_mask,
                             std::string_view name) {
  Op op;
  op.kind = OpKind::kFree;
  op.stream = static_cast<std::uint16_t>(stream);
  op.ref = alloc_op;
  op.arg = record_mask;
  op.bytes = role_.ops[alloc_op].bytes;
  return add(op, name);
}

int RoleBuilder::record(int stream, std::string_view event, std::string_view name) {
  Op op;
  op.kind = OpKind::kEventRecord;
  op.stream = static_cast<std::uint16_t>(stream);
  op.ref = this->event(event);
  return add(op, name);
}

int RoleBuilder::wait(int stream, std::string_view event, std::string_view name) {
  const int i = record(stream, event, name);
  role_.ops[i].kind = OpKind::kEventWait;
  return i;
}

int RoleBuilder::marker(int stream, MarkerKind kind, int index, std::string_view name) {
  Op op;
  op.kind = OpKind::kMarker;
  op.stream = static_cast<std::uint16_t>(stream);
  op.marker = kind;
  op.arg = index;
  return add(op, name);
}

}  // namespace prism
