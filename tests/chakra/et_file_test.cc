// The trace framing and the schema's wire format, byte by byte, and every
// way a file's bytes are refused. Also the communicator-group file.
#include "chakra/et_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "chakra/comm_groups.h"
#include "chakra_test_util.h"

namespace prism::chakra {
namespace {

using ::testing::HasSubstr;

std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int c : b) s.push_back(static_cast<char>(c));
  return s;
}

// GlobalMetadata{version "0.0.4"} and Node{id 1, name "a", type COMP_NODE,
// data_deps [7, 300], duration_micros 5, attr {comm_size: int64 1024},
// attr {pg_name: string "3"}}, as Chakra's et_def.proto puts them on the wire.
const std::string kMeta = bytes({0x0a, 0x05, '0', '.', '0', '.', '4'});
const std::string kNode =
    bytes({0x08, 0x01,                    // id = 1
           0x12, 0x01, 'a',               // name = "a"
           0x18, 0x04,                    // type = COMP_NODE
           0x2a, 0x03, 0x07, 0xac, 0x02,  // data_deps = [7, 300], packed
           0x38, 0x05,                    // duration_micros = 5
           0x52, 0x0e, 0x0a, 0x09, 'c',  'o',  'm',  'm',
           '_',  's',  'i',  'z',  'e',  0x48, 0x80, 0x08,  // int64_val = 1024 (field 9)
           0x52, 0x0d, 0x0a, 0x07, 'p',  'g',  '_',  'n',
           'a',  'm',  'e',  0xea, 0x01, 0x01, '3'});  // string_val = "3" (field 29)
const std::string kFile = bytes({0x07}) + kMeta + bytes({static_cast<int>(kNode.size())}) + kNode;

TEST(EtFileTest, GeneratedClassesWriteChakrasWireFormat) {
  ChakraProtoMsg::GlobalMetadata meta;
  meta.set_version("0.0.4");
  ChakraProtoMsg::Node n;
  n.set_id(1);
  n.set_name("a");
  n.set_type(ChakraProtoMsg::COMP_NODE);
  n.add_data_deps(7);
  n.add_data_deps(300);
  n.set_duration_micros(5);
  add_int(n.mutable_attr(), kCommSize, 1024);
  add_string(n.mutable_attr(), kPgName, "3");
  std::string out;
  append_delimited(meta, &out);
  append_delimited(n, &out);
  EXPECT_EQ(out, kFile);
}

TEST(EtFileTest, DecodesAHandWrittenFile) {
  Result<EtFile> f = decode_et(kFile, "t.0.et");
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ(f->metadata->version(), "0.0.4");
  ASSERT_EQ(f->nodes.size(), 1u);
  const ChakraProtoMsg::Node& n = *f->nodes[0];
  EXPECT_EQ(n.id(), 1u);
  EXPECT_EQ(n.name(), "a");
  EXPECT_EQ(n.type(), ChakraProtoMsg::COMP_NODE);
  EXPECT_THAT(n.data_deps(), ::testing::ElementsAre(7u, 300u));
  EXPECT_EQ(n.duration_micros(), 5u);
  Result<std::optional<std::int64_t>> size = int_attr(n.attr(), kCommSize, "here");
  ASSERT_TRUE(size.is_ok());
  EXPECT_EQ(size.value(), 1024);
  Result<std::optional<std::string>> pg = string_attr(n.attr(), kPgName, "here");
  ASSERT_TRUE(pg.is_ok());
  EXPECT_EQ(pg.value(), "3");
}

TEST(EtFileTest, LongMessagesUseMultiByteLengthPrefixes) {
  ChakraProtoMsg::GlobalMetadata meta;
  meta.set_version(std::string(300, 'v'));
  std::string out;
  append_delimited(meta, &out);
  EXPECT_EQ(out.substr(0, 2), bytes({0xaf, 0x02}));  // 303 = 0b10'0101111
  Result<EtFile> f = decode_et(out, "long");
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ(f->metadata->version().size(), 300u);
}

TEST(EtFileTest, AttributesOfAnyIntegerTypeRead) {
  ChakraProtoMsg::Node n;
  auto* a = n.add_attr();
  a->set_name("x");
  a->set_uint32_val(7);
  auto* b = n.add_attr();
  b->set_name("y");
  b->set_string_val("s");
  EXPECT_EQ(int_attr(n.attr(), "x", "w").value(), 7);
  EXPECT_FALSE(int_attr(n.attr(), "missing", "w").value().has_value());
  Result<std::optional<std::int64_t>> bad = int_attr(n.attr(), "y", "node 3");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().message(), "node 3: attribute 'y' is not an integer");
  a->set_uint64_val(~0ull);
  EXPECT_THAT(int_attr(n.attr(), "x", "w").status().message(), HasSubstr("past 2^63"));
}

std::string error_of(const std::string& file) {
  Result<EtFile> f = decode_et(file, "r.3.et");
  EXPECT_FALSE(f.is_ok());
  return f.is_ok() ? "" : f.status().message();
}

TEST(EtFileRejectsTest, EmptyFile) {
  EXPECT_THAT(error_of(""), HasSubstr("r.3.et: empty file"));
}

TEST(EtFileRejectsTest, BadVarint) {
  EXPECT_EQ(error_of(bytes({0xff, 0xff, 0xff, 0xff, 0xff, 0x01})),
            "r.3.et: byte 0: bad length prefix (not a varint32)");
  EXPECT_THAT(error_of(bytes({0xff, 0xff, 0xff, 0xff, 0x7f})), HasSubstr("bad length prefix"));
}

TEST(EtFileRejectsTest, FileEndsInsideAPrefix) {
  EXPECT_EQ(error_of(bytes({0x07}) + kMeta + bytes({0x80})),
            "r.3.et: byte 8 (node message 0): the file ends inside a length prefix");
}

TEST(EtFileRejectsTest, TruncatedMessage) {
  EXPECT_EQ(error_of(bytes({0x07}) + kMeta + bytes({0x0a, 0x08, 0x01})),
            "r.3.et: byte 8 (node message 0): truncated message: its prefix says 10 bytes, the "
            "file has 2 left");
}

TEST(EtFileRejectsTest, MessagesThatDoNotParse) {
  EXPECT_EQ(error_of(bytes({0x02, 0x0a, 0x7f})),
            "r.3.et: byte 0: the GlobalMetadata does not parse");
  EXPECT_EQ(error_of(kFile + bytes({0x02, 0x0a, 0x7f})),
            "r.3.et: byte " + std::to_string(kFile.size()) +
                " (node message 1): the Node does not parse");
}

// A string field with invalid UTF-8: protobuf's reason in the one error
// line, and none of protobuf's own log lines on stderr (issue 26).
TEST(EtFileRejectsTest, InvalidUtf8IsNamedAndProtobufLogsNothing) {
  ::testing::internal::CaptureStderr();
  const std::string error = error_of(bytes({0x07, 0x0a, 0x05, '0', 0xff, '0', '.', '4'}));
  const std::string stderr_text = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(error,
            "r.3.et: byte 0: the GlobalMetadata does not parse: field "
            "ChakraProtoMsg.GlobalMetadata.version holds invalid UTF-8");
  EXPECT_EQ(stderr_text, "");
  // The reason does not outlive its message: the next failure has its own.
  EXPECT_EQ(error_of(bytes({0x02, 0x0a, 0x7f})),
            "r.3.et: byte 0: the GlobalMetadata does not parse");
}

TEST(CommGroupsTest, WritesOneGroupPerLineFromIdOne) {
  EXPECT_EQ(write_comm_groups({{0, 1}, {2, 3}}), "{\n  \"1\": [0, 1],\n  \"2\": [2, 3]\n}\n");
  EXPECT_EQ(write_comm_groups({}), "{}\n");
}

TEST(CommGroupsTest, ParsesInNumericIdOrder) {
  Result<std::vector<CommGroup>> g =
      parse_comm_groups(R"({"10": [3, 2], "2": [0, 1], "x": [1]})", 4, "g.json");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  ASSERT_EQ(g->size(), 3u);
  EXPECT_EQ((*g)[0].id, "2");
  EXPECT_EQ((*g)[1].id, "10");
  EXPECT_EQ((*g)[1].members, (std::vector<Rank>{3, 2}));
  EXPECT_EQ((*g)[2].id, "x");
}

TEST(CommGroupsTest, Rejections) {
  auto error = [](const std::string& json) {
    Result<std::vector<CommGroup>> g = parse_comm_groups(json, 4, "g.json");
    return g.is_ok() ? std::string() : g.status().message();
  };
  EXPECT_EQ(error("{"),
            "g.json:1:2: malformed JSON: the text ends before the JSON value is complete");
  EXPECT_THAT(error("[]"), HasSubstr("g.json: not a JSON object"));
  // Found by fuzz/chakra_et: nlohmann's out_of_range escaped the parse.
  EXPECT_THAT(error(R"({"1": [0, 1e400]})"),
              HasSubstr("g.json: malformed JSON: a number outside the range of a double"));
  EXPECT_EQ(error(R"({"1": []})"), "g.json: group \"1\": not a non-empty list of ranks");
  EXPECT_EQ(error(R"({"1": [0, 4]})"), "g.json: group \"1\": 4 is not a rank of the 4 traces");
  EXPECT_EQ(error(R"({"1": [0, "a"]})"),
            "g.json: group \"1\": \"a\" is not a rank of the 4 traces");
  EXPECT_EQ(error(R"({"1": [0, 0]})"), "g.json: group \"1\": rank 0 listed twice");
  // Once a stack overflow while the nested value was printed.
  EXPECT_EQ(error(R"({"1": [0, )" + std::string(100000, '[') + std::string(100000, ']') + "]}"),
            "g.json: values nested deeper than 64 levels");
}

}  // namespace
}  // namespace prism::chakra
