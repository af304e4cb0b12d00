#include "graph/role_builder.h"

#include <algorithm>
#include <utility>

namespace prism {

RoleBuilder::RoleBuilder(std::string name, std::vector<std::string> streams) {
  role_.name = std::move(name);
  role_.streams = std::move(streams);
}

int RoleBuilder::intern(std::vector<std::string>* table, std::string_view s) {
  auto it = std::find(table->begin(), table->end(), s);
  if (it != table->end()) return static_cast<int>(it - table->begin());
  table->emplace_back(s);
  return static_cast<int>(table->size() - 1);
}

int RoleBuilder::push(Op op, std::string_view name) {
  if (!name.empty()) op.name = intern(&role_.names, name);
  op.deps_begin = op.deps_end = static_cast<std::uint32_t>(role_.deps.size());
  role_.ops.push_back(op);
  return static_cast<int>(role_.ops.size() - 1);
}

void RoleBuilder::add_deps(std::initializer_list<int> deps) {
  Op& op = role_.ops.back();
  // Only the last op's deps may grow: they sit at the end of Role::deps.
  for (int d : deps) role_.deps.push_back(d);
  op.deps_end = static_cast<std::uint32_t>(role_.deps.size());
}

int RoleBuilder::compute(int stream, SimTime duration, std::string_view name,
                         std::initializer_list<int> deps) {
  Op op;
  op.kind = OpKind::kCompute;
  op.stream = static_cast<std::uint16_t>(stream);
  op.duration = duration;
  const int i = push(op, name);
  add_deps(deps);
  return i;
}

int RoleBuilder::compute_cost(int stream, const KernelCost& cost, std::string_view name) {
  Op op;
  op.kind = OpKind::kCompute;
  op.stream = static_cast<std::uint16_t>(stream);
  op.cost = static_cast<std::int32_t>(role_.costs.size());
  role_.costs.push_back(cost);
  return push(op, name);
}

int RoleBuilder::collective(int stream, int slot, CollectiveKind kind, Bytes bytes, DType dtype,
                            int root) {
  Op op;
  op.kind = OpKind::kCollective;
  op.stream = static_cast<std::uint16_t>(stream);
  op.ref = slot;
  op.collective = kind;
  op.bytes = bytes;
  op.dtype = dtype;
  op.arg = root;
  return push(op);
}

int RoleBuilder::send(int stream, int peer_slot, Bytes bytes, int tag) {
  Op op;
  op.kind = OpKind::kSend;
  op.stream = static_cast<std::uint16_t>(stream);
  op.ref = peer_slot;
  op.bytes = bytes;
  op.arg = tag;
  return push(op);
}

int RoleBuilder::recv(int stream, int peer_slot, Bytes bytes, int tag) {
  const int i = send(stream, peer_slot, bytes, tag);
  role_.ops[i].kind = OpKind::kRecv;
  return i;
}

int RoleBuilder::alloc(int stream, Bytes bytes) {
  Op op;
  op.kind = OpKind::kAlloc;
  op.stream = static_cast<std::uint16_t>(stream);
  op.bytes = bytes;
  return push(op);
}

int RoleBuilder::free(int stream, int alloc_op, std::initializer_list<int> record_streams) {
  Op op;
  op.kind = OpKind::kFree;
  op.stream = static_cast<std::uint16_t>(stream);
  op.ref = alloc_op;
  for (int s : record_streams) op.arg |= 1 << s;
  op.bytes = role_.ops[alloc_op].bytes;
  return push(op);
}

int RoleBuilder::record(int stream, std::string_view event) {
  Op op;
  op.kind = OpKind::kEventRecord;
  op.stream = static_cast<std::uint16_t>(stream);
  op.ref = intern(&role_.events, event);
  return push(op);
}

int RoleBuilder::wait(int stream, std::string_view event) {
  const int i = record(stream, event);
  role_.ops[i].kind = OpKind::kEventWait;
  return i;
}

int RoleBuilder::marker(int stream, MarkerKind kind, int index) {
  Op op;
  op.kind = OpKind::kMarker;
  op.stream = static_cast<std::uint16_t>(stream);
  op.marker = kind;
  op.arg = index;
  return push(op);
}

}  // namespace prism
