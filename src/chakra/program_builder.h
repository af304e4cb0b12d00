// Internal to import_chakra(): turns one rank's nodes, given in issue order,
// into the ops of a RankProgram (the mapping is in chakra/import_rank.h and
// docs/chakra.md).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "chakra/attributes.h"
#include "chakra/import_rank.h"
#include "graph/role_builder.h"

namespace prism::chakra {

// Whether import keeps a node as an op (else it forwards its dependencies),
// or why the node cannot be imported.
Result<bool> is_op_node(const ChakraProtoMsg::Node& n, const Place& where);

class ProgramBuilder {
 public:
  ProgramBuilder(Rank rank, const ImportContext& ctx, const std::string& source);

  // Streams named by the trace's GlobalMetadata (prism_streams).
  Status start(const ChakraProtoMsg::GlobalMetadata& meta);
  // Appends `n` as the next op; `deps` are ops it waits for (earlier ones).
  Status add(const ChakraProtoMsg::Node& n, const std::vector<std::int32_t>& deps);
  RankProgram finish() &&;

 private:
  Place where(const ChakraProtoMsg::Node& n) const { return Place(source_, n.id()); }
  Result<int> stream_of(const ChakraProtoMsg::Node& n, const Place& where);
  // The role stream of the trace's stream index `k` (a "stream" attribute).
  Result<int> stream_at(std::int64_t k, const Place& where);
  int stream_named(const std::string& name) { return role_.stream(name); }

  Status compute(const ChakraProtoMsg::Node& n, const Place& where, Op* op);
  Status collective(const ChakraProtoMsg::Node& n, const Place& where, Op* op);
  Status p2p(const ChakraProtoMsg::Node& n, const Place& where, Op* op);
  Status untimed(const ChakraProtoMsg::Node& n, const Place& where, Op* op);
  Status free_op(const ChakraProtoMsg::Node& n, const Place& where, Op* op);
  Result<Bytes> bytes_attr(const Attrs& a, std::string_view name, const Place& where,
                           bool required);

  Rank rank_;
  const ImportContext& ctx_;
  std::string source_;
  RankProgram program_;  // its role is built in role_
  RoleBuilder role_;
  std::vector<std::string> named_streams_;  // prism_streams: "stream" attr -> name
  std::unordered_map<std::string, std::int32_t> comm_index_;       // pg_name -> comms index
  std::unordered_map<Rank, std::int32_t> peer_index_;              // rank -> peers index
  std::unordered_map<std::uint64_t, std::int32_t> alloc_of_node_;  // node id -> its alloc op
};

}  // namespace prism::chakra
