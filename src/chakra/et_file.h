// The framing of a Chakra trace file: messages, each preceded by its length
// as a varint32 (at most 5 bytes, as Chakra's protolib writes it). The first
// message is a GlobalMetadata, every other one a Node. Also the names of a
// job's files (chakra/chakra.h).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "chakra/et_def.pb.h"
#include "util/status.h"

namespace prism::chakra {

// "<prefix>.<rank>.et" and "<prefix>.comm_groups.json".
std::string trace_file_name(std::string_view prefix, long long rank);
std::string comm_groups_file_name(std::string_view prefix);
// A trace's file name -> its prefix and rank; false for any other name.
bool split_trace_file_name(const std::string& name, std::string* prefix, long long* rank);

// Appends `msg`'s length and bytes to `out`.
void append_delimited(const google::protobuf::MessageLite& msg, std::string* out);

// The messages live on an arena: a trace holds millions of small messages,
// which one arena allocates and frees at a fraction of the cost.
struct EtFile {
  std::unique_ptr<google::protobuf::Arena> arena;
  const ChakraProtoMsg::GlobalMetadata* metadata = nullptr;
  std::vector<const ChakraProtoMsg::Node*> nodes;  // file order
};

// Decodes a whole trace; `source` (the file) starts every error message.
Result<EtFile> decode_et(std::string_view bytes, const std::string& source);

}  // namespace prism::chakra
