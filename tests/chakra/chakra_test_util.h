// Helpers for the Chakra tests: a scratch directory per test, and traces
// built node by node with the generated protobuf classes.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <vector>

#include "chakra/attributes.h"
#include "chakra/et_file.h"
#include "util/file.h"

namespace prism::chakra_test {

// A fresh directory named after the running test, removed afterwards.
class ScratchDir {
 public:
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            ("prism-chakra-" + std::string(info->test_suite_name()) + "-" + info->name() + "-" +
             std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

using ChakraProtoMsg::Node;

inline Node node(std::uint64_t id, ChakraProtoMsg::NodeType type,
                 std::initializer_list<std::uint64_t> deps = {}) {
  Node n;
  n.set_id(id);
  n.set_name("n" + std::to_string(id));
  n.set_type(type);
  for (std::uint64_t d : deps) n.add_data_deps(d);
  return n;
}

inline Node comp(std::uint64_t id, std::uint64_t micros,
                 std::initializer_list<std::uint64_t> deps = {}) {
  Node n = node(id, ChakraProtoMsg::COMP_NODE, deps);
  n.set_duration_micros(micros);
  chakra::add_bool(n.mutable_attr(), chakra::kIsCpuOp, false);
  return n;
}

inline Node coll(std::uint64_t id, int comm_type, std::int64_t bytes, const std::string& pg,
                 std::initializer_list<std::uint64_t> deps = {}) {
  Node n = node(id, ChakraProtoMsg::COMM_COLL_NODE, deps);
  chakra::add_int(n.mutable_attr(), chakra::kCommType, comm_type);
  chakra::add_int(n.mutable_attr(), chakra::kCommSize, bytes);
  if (!pg.empty()) chakra::add_string(n.mutable_attr(), chakra::kPgName, pg);
  return n;
}

// A send (or receive) of `bytes` from `src` to `dst`.
inline Node p2p(std::uint64_t id, bool send, int src, int dst, std::int64_t bytes, int tag = 0,
                std::initializer_list<std::uint64_t> deps = {}) {
  Node n = node(id, send ? ChakraProtoMsg::COMM_SEND_NODE : ChakraProtoMsg::COMM_RECV_NODE, deps);
  chakra::add_int(n.mutable_attr(), chakra::kCommSrc, src);
  chakra::add_int(n.mutable_attr(), chakra::kCommDst, dst);
  chakra::add_int(n.mutable_attr(), chakra::kCommTag, tag);
  chakra::add_int(n.mutable_attr(), chakra::kCommSize, bytes);
  return n;
}

inline std::string encode(const std::vector<Node>& nodes) {
  ChakraProtoMsg::GlobalMetadata meta;
  meta.set_version("0.0.4");
  std::string out;
  chakra::append_delimited(meta, &out);
  for (const Node& n : nodes) chakra::append_delimited(n, &out);
  return out;
}

inline void write_trace(const std::string& path, const std::vector<Node>& nodes) {
  ASSERT_TRUE(write_file_atomic(path, encode(nodes)).is_ok()) << path;
}

}  // namespace prism::chakra_test
