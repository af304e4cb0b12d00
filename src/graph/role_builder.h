// RoleBuilder: appends ops to a Role in issue order, for in-memory builders
// and tests. Each call returns the new op's index. Names and events are
// interned by string; dependencies go to Role::deps. The result still has to
// pass finalize_graph() and validate_graph() as part of its graph.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace prism {

class RoleBuilder {
 public:
  RoleBuilder(std::string name, std::vector<std::string> streams);

  int compute(int stream, SimTime duration, std::string_view name = {},
              std::initializer_list<int> deps = {});
  int compute_cost(int stream, const KernelCost& cost, std::string_view name = {});
  int collective(int stream, int slot, CollectiveKind kind, Bytes bytes,
                 DType dtype = DType::kBFloat16, int root = 0);
  int send(int stream, int peer_slot, Bytes bytes, int tag = 0);
  int recv(int stream, int peer_slot, Bytes bytes, int tag = 0);
  int alloc(int stream, Bytes bytes);
  // `record_streams`: the streams the block was recorded on (Op::arg's mask).
  int free(int stream, int alloc_op, std::initializer_list<int> record_streams = {});
  int record(int stream, std::string_view event);
  int wait(int stream, std::string_view event);
  int marker(int stream, MarkerKind kind, int index);

  // Sets the NCCL group of op `op` (consecutive communication ops of a stream
  // with the same nonzero group start together).
  void set_group(int op, std::uint32_t group) { role_.ops[op].group = group; }
  // Sets the element type of send or receive `op` (bf16 unless set).
  void set_dtype(int op, DType dtype) { role_.ops[op].dtype = dtype; }
  // Adds explicit dependencies to the most recently added op.
  void add_deps(std::initializer_list<int> deps);

  const Role& role() const { return role_; }
  Role build() && { return std::move(role_); }

 private:
  int push(Op op, std::string_view name = {});
  int intern(std::vector<std::string>* table, std::string_view s);
  Role role_;
};

}  // namespace prism
