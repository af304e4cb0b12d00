// export_chakra: what each node of a rank's trace holds, the group file,
// determinism, atomic replacement, and refusals.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "chakra/chakra.h"
#include "chakra_test_util.h"
#include "test_graph.h"

namespace prism {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace chakra_test;  // NOLINT(google-build-using-namespace)

chakra::EtFile read_trace(const std::string& path) {
  Result<std::string> bytes = read_file(path);
  EXPECT_TRUE(bytes.is_ok()) << bytes.status().message();
  Result<chakra::EtFile> f = chakra::decode_et(bytes.value(), path);
  EXPECT_TRUE(f.is_ok()) << f.status().message();
  return std::move(f).value();
}

std::int64_t int_of(const Node& n, std::string_view name) {
  Result<std::optional<std::int64_t>> v = chakra::int_attr(n.attr(), name, "test");
  EXPECT_TRUE(v.is_ok() && v.value().has_value()) << name;
  return v.is_ok() ? v.value().value_or(-1) : -1;
}

std::string string_of(const Node& n, std::string_view name) {
  Result<std::optional<std::string>> v = chakra::string_attr(n.attr(), name, "test");
  EXPECT_TRUE(v.is_ok() && v.value().has_value()) << name;
  return v.is_ok() ? v.value().value_or("") : "";
}

class ChakraExportTest : public ::testing::Test {
 protected:
  ChakraExportOptions options() const {
    ChakraExportOptions o;
    o.prefix = "w";
    o.compute = &roofline_;
    return o;
  }
  RooflineModel roofline_;
  ScratchDir dir_;
};

TEST_F(ChakraExportTest, EveryOpIsANodeWithItsAttributes) {
  ASSERT_TRUE(export_chakra(small_graph(), dir_.path(), options()).is_ok());
  const chakra::EtFile f = read_trace(dir_.file("w.1.et"));
  EXPECT_EQ(f.metadata->version(), "0.0.4");
  ASSERT_EQ(f.nodes.size(), 11u);
  for (std::size_t i = 0; i < f.nodes.size(); ++i) {
    EXPECT_EQ(f.nodes[i]->id(), i);
    EXPECT_EQ(int_of(*f.nodes[i], chakra::kIsCpuOp), 0);
  }
  const Node& marker = *f.nodes[0];
  EXPECT_EQ(marker.type(), ChakraProtoMsg::METADATA_NODE);
  EXPECT_EQ(string_of(marker, chakra::kPrismOp), "marker");
  EXPECT_EQ(string_of(marker, chakra::kPrismMarker), "iteration");

  const Node& fwd = *f.nodes[2];
  EXPECT_EQ(fwd.type(), ChakraProtoMsg::COMP_NODE);
  EXPECT_EQ(fwd.name(), "fwd");
  EXPECT_EQ(fwd.duration_micros(), 2u);  // 1.5 us, rounded
  EXPECT_EQ(int_of(fwd, chakra::kPrismDurationNs), 1500);
  EXPECT_THAT(fwd.data_deps(), ElementsAre(1u));  // stream order

  const Node& wait = *f.nodes[4];
  EXPECT_THAT(wait.data_deps(), ElementsAre(3u));  // the event's record
  const Node& ar = *f.nodes[5];
  EXPECT_EQ(ar.type(), ChakraProtoMsg::COMM_COLL_NODE);
  EXPECT_EQ(ar.name(), "all_reduce");
  EXPECT_EQ(int_of(ar, chakra::kCommType), ChakraProtoMsg::ALL_REDUCE);
  EXPECT_EQ(int_of(ar, chakra::kCommSize), 4096);
  EXPECT_EQ(string_of(ar, chakra::kPgName), "1");
  EXPECT_EQ(string_of(ar, chakra::kPrismDtype), "fp32");
  EXPECT_EQ(int_of(ar, chakra::kStream), 1);

  const Node& gemm = *f.nodes[7];
  EXPECT_EQ(int_of(gemm, chakra::kNumOps), 1'000'000'000'000);
  EXPECT_EQ(int_of(gemm, chakra::kTensorSize), 1'000'000'000);
  EXPECT_EQ(string_of(gemm, chakra::kPrismKernelClass), "gemm");
  EXPECT_EQ(int_of(gemm, chakra::kPrismDurationNs),
            roofline_.duration(KernelCost{KernelClass::kGemm, 1e12, Bytes{1'000'000'000}}).ns);

  const Node& send = *f.nodes[8];
  EXPECT_EQ(send.type(), ChakraProtoMsg::COMM_SEND_NODE);
  EXPECT_EQ(int_of(send, chakra::kCommSrc), 1);
  EXPECT_EQ(int_of(send, chakra::kCommDst), 0);
  EXPECT_EQ(int_of(send, chakra::kCommTag), 3);
  EXPECT_EQ(int_of(send, chakra::kPrismGroup), 1);
  EXPECT_EQ(string_of(send, chakra::kPrismTransport), "userbuffers");
  const Node& recv = *f.nodes[9];
  EXPECT_EQ(recv.type(), ChakraProtoMsg::COMM_RECV_NODE);
  EXPECT_EQ(int_of(recv, chakra::kCommSrc), 0);
  EXPECT_EQ(int_of(recv, chakra::kCommDst), 1);
  EXPECT_THAT(recv.data_deps(), ElementsAre(8u, 7u));  // stream order, then explicit
}

TEST_F(ChakraExportTest, WritesTheGroupFileAndIsDeterministic) {
  ASSERT_TRUE(export_chakra(small_graph(), dir_.path(), options()).is_ok());
  EXPECT_EQ(read_file(dir_.file("w.comm_groups.json")).value(), "{\n  \"1\": [0, 1]\n}\n");
  const std::string first = read_file(dir_.file("w.0.et")).value();
  ASSERT_TRUE(export_chakra(small_graph(), dir_.path() / "again", options()).is_ok());
  EXPECT_EQ(read_file((dir_.path() / "again" / "w.0.et").string()).value(), first);
}

TEST_F(ChakraExportTest, AComputeScaleChangesOnlyThatRanksDurations) {
  ExecutionGraph g = small_graph();
  g.overrides.push_back(RankOverride{1, 2'000'000});
  ASSERT_TRUE(export_chakra(g, dir_.path(), options()).is_ok());
  EXPECT_EQ(int_of(*read_trace(dir_.file("w.0.et")).nodes[2], chakra::kPrismDurationNs), 1500);
  EXPECT_EQ(int_of(*read_trace(dir_.file("w.1.et")).nodes[2], chakra::kPrismDurationNs), 3000);
}

TEST_F(ChakraExportTest, RemovesRankFilesOfAnEarlierLargerExport) {
  write_trace(dir_.file("w.7.et"), {});
  write_trace(dir_.file("other.7.et"), {});
  ASSERT_TRUE(export_chakra(small_graph(), dir_.path(), options()).is_ok());
  EXPECT_FALSE(std::filesystem::exists(dir_.file("w.7.et")));
  EXPECT_TRUE(std::filesystem::exists(dir_.file("other.7.et")));
  EXPECT_TRUE(std::filesystem::exists(dir_.file("w.1.et")));
}

TEST_F(ChakraExportTest, RefusesKernelCostsWithoutAComputeModel) {
  ChakraExportOptions o = options();
  o.compute = nullptr;
  const std::filesystem::path out = dir_.path() / "out";
  Status s = export_chakra(small_graph(), out, o);
  ASSERT_FALSE(s.is_ok());
  EXPECT_THAT(s.message(), HasSubstr("role 'r' op 7 ('gemm'): a compute op with a kernel cost and "
                                     "no duration"));
  EXPECT_FALSE(std::filesystem::exists(out));  // nothing written
}

TEST_F(ChakraExportTest, RefusesABadPrefixOrAnInvalidGraph) {
  ChakraExportOptions o = options();
  o.prefix = "a/b";
  EXPECT_THAT(export_chakra(small_graph(), dir_.path(), o).message(),
              HasSubstr("prefix 'a/b' must be a non-empty file name"));
  ExecutionGraph g = small_graph();
  g.role_of_rank.pop_back();
  EXPECT_THAT(export_chakra(g, dir_.path(), options()).message(), HasSubstr("role_of_rank"));
}

}  // namespace
}  // namespace prism
