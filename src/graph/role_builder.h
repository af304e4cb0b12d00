// RoleBuilder: the one way ops are appended to a Role, in issue order, by
// every producer of the IR (the Megatron and synthetic builders, slicing's
// captures, the Chakra and Kineto importers) and by tests. Each call returns
// the new op's index. Op names, events and streams are interned by string in
// order of first use (a hash map each, so interning costs the same however
// large the table grows); a table given to the constructor keeps its order.
// Dependencies go to Role::deps. The result still has to pass
// finalize_graph() and validate_graph() as part of its graph.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "graph/graph.h"

namespace prism {

class RoleBuilder {
 public:
  RoleBuilder(std::string name, std::vector<std::string> streams);

  int compute(int stream, SimTime duration, std::string_view name = {},
              std::initializer_list<int> deps = {});
  int compute_cost(int stream, const KernelCost& cost, std::string_view name = {});
  int collective(int stream, int slot, CollectiveKind kind, Bytes bytes,
                 DType dtype = DType::kBFloat16, int root = 0, std::string_view name = {});
  int send(int stream, int peer_slot, Bytes bytes, int tag = 0, std::string_view name = {});
  int recv(int stream, int peer_slot, Bytes bytes, int tag = 0, std::string_view name = {});
  int alloc(int stream, Bytes bytes, std::string_view name = {});
  // `record_streams`: the streams the block was recorded on (Op::arg's mask).
  int free(int stream, int alloc_op, std::initializer_list<int> record_streams = {});
  // The same with the record-stream mask itself (bit s: stream s).
  int free_masked(int stream, int alloc_op, std::int32_t record_mask, std::string_view name = {});
  int record(int stream, std::string_view event, std::string_view name = {});
  int wait(int stream, std::string_view event, std::string_view name = {});
  int marker(int stream, MarkerKind kind, int index, std::string_view name = {});
  // Appends `op` as it is (kind, stream and fields set by the caller; refs to
  // events from event()), named `name` when not empty, with no dependencies
  // yet. The calls above end here.
  int add(Op op, std::string_view name = {});

  // Sets the NCCL group of op `op` (consecutive communication ops of a stream
  // with the same nonzero group start together).
  void set_group(int op, std::uint32_t group) { role_.ops[op].group = group; }
  void set_transport(int op, Transport t) { role_.ops[op].transport = t; }
  // Sets the element type of send or receive `op` (bf16 unless set).
  void set_dtype(int op, DType dtype) { role_.ops[op].dtype = dtype; }
  // Adds explicit dependencies to the most recently added op.
  void add_deps(std::initializer_list<int> deps);
  void add_dep(int dep);

  // Indices in the role's tables, added at the end on first use.
  int name(std::string_view s) { return intern(&role_.names, &names_, s); }
  int event(std::string_view s) { return intern(&role_.events, &events_, s); }
  int stream(std::string_view s) { return intern(&role_.streams, &streams_, s); }
  // The index of a new entry of Role::costs (for an op's `cost`).
  int add_cost(const KernelCost& cost);

  const Op& op(int i) const { return role_.ops[static_cast<std::size_t>(i)]; }
  int size() const { return static_cast<int>(role_.ops.size()); }
  void reserve(std::size_t ops) { role_.ops.reserve(ops); }
  const Role& role() const { return role_; }
  Role build() && { return std::move(role_); }

 private:
  using Index = absl::flat_hash_map<std::string, int>;
  static int intern(std::vector<std::string>* table, Index* index, std::string_view s);
  Role role_;
  Index names_, events_, streams_;
};

}  // namespace prism
