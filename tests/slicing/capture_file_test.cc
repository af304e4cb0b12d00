// The capture file format: what format_capture_json() writes,
// parse_capture_json() reads back as the same messages, and the reader's
// refusals.
#include "slicing/capture_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace prism {
namespace {

using ::testing::HasSubstr;

// One of every message, with the fields the format keeps.
RankCapture every_message() {
  RankCapture c{3, 8, 42, "train.py", "ddp", {}};
  wire::Op op;
  op.op_id = 7;
  op.comm = 1;
  op.stream = 2;
  op.code = wire::OpCode::kSend;
  op.dtype = DType::kFloat32;
  op.bytes = 4096;
  op.peer = 1;
  op.tag = 5;
  op.group = 9;
  op.at = 100;
  wire::Wait poll;
  poll.wait_id = 1;
  poll.answers_seen = 2;
  poll.at = 150;
  poll.until = 500;
  const std::vector<CaptureEntry> entries = {
      {wire::Hello{3, 8, 0, 42, ""}},
      {wire::Welcome{0, 0, 10, ""}},
      {wire::CommInit{1, 8, 3, 99, {0, 1, 2, 3, 4, 5, 6, 7}}},
      {wire::CommSplit{1, 2, 0, 3}},
      {wire::CommInfo{2, 1, {2, 3}}},
      {op, 12},
      {wire::Complete{7, 120}},
      {wire::Wait{4, 7, 1, 130}},
      {poll},
      {wire::Horizon{1, 500}},
      {wire::Memory{wire::MemoryAction::kAlloc, 0xdead, 1 << 20, 0, 600}},
      {wire::Memory{wire::MemoryAction::kFree, 0xdead, 1 << 20, 0, 700}},
      {wire::Marker{wire::MarkerCode::kPhase, 2, 800}},
      {wire::Compute{1, 900, 50, "gemm"}},
      {wire::Error{wire::ErrorCode::kRejected, "no"}},
      {wire::Bye{0, 1000}},
  };
  c.entries = entries;
  return c;
}

TEST(CaptureFileTest, ReadsBackWhatItWrites) {
  const RankCapture c = every_message();
  const std::string text = format_capture_json(c);
  Result<RankCapture> back = parse_capture_json(text, "cap");
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back.value().rank, 3);
  EXPECT_EQ(back.value().world_size, 8);
  EXPECT_EQ(back.value().pid, 42);
  EXPECT_EQ(back.value().program, "train.py");
  EXPECT_EQ(back.value().job, "ddp");
  ASSERT_EQ(back.value().entries.size(), c.entries.size());
  for (std::size_t i = 0; i < c.entries.size(); ++i) {
    EXPECT_EQ(wire::type_of(back.value().entries[i].message), wire::type_of(c.entries[i].message))
        << i;
  }
  EXPECT_EQ(back.value().entries[5].graph_op, 12);
  EXPECT_EQ(back.value().entries[0].graph_op, kNone);
  const wire::Op& op = std::get<wire::Op>(back.value().entries[5].message);
  EXPECT_EQ(op.code, wire::OpCode::kSend);
  EXPECT_EQ(op.dtype, DType::kFloat32);
  EXPECT_EQ(op.group, 9u);
  EXPECT_EQ(std::get<wire::Wait>(back.value().entries[7].message).until, wire::kNoLimit);
  EXPECT_EQ(std::get<wire::Wait>(back.value().entries[8].message).op_id, wire::kAnyOp);
  // Everything the format keeps survives: writing it again gives the same bytes.
  EXPECT_EQ(format_capture_json(back.value()), text);
}

TEST(CaptureFileTest, OptionalFieldsReadAsDefaults) {
  Result<RankCapture> c = parse_capture_json(
      "{\"format\":\"prism-capture\",\"version\":1,\"events\":["
      "{\"type\":\"hello\",\"rank\":1,\"world_size\":2},"
      "{\"type\":\"compute\",\"at\":5,\"duration\":3,\"stream\":0},"
      "{\"type\":\"complete\"}]}",
      "cap");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  ASSERT_EQ(c.value().entries.size(), 3u);
  EXPECT_EQ(std::get<wire::Hello>(c.value().entries[0].message).pid, 0);
  EXPECT_EQ(std::get<wire::Compute>(c.value().entries[1].message).name, "kernels");
}

TEST(CaptureFileTest, RefusesWhatIsNotACapture) {
  const std::pair<std::string, std::string> cases[] = {
      {"{\"format\":", "cap:1:11: malformed JSON: the text ends before the JSON value is complete"},
      // Found by fuzz/capture_file: nlohmann's out_of_range escaped the parse.
      {"{\"format\":\"prism-capture\",\"version\":-1e4001,\"events\":[]}",
       "cap: malformed JSON: a number outside the range of a double (such as 1e400)"},
      {"[1]", "cap: not a prism-capture document"},
      {"{\"format\":\"prism-capture\",\"version\":2,\"events\":[]}",
       "cap: version 2 (this build reads version 1)"},
      {"{\"format\":\"prism-capture\",\"version\":1}", "cap: no \"events\" list"},
      {"{\"format\":\"prism-capture\",\"version\":1,\"events\":[3]}",
       "cap: event 0: not an object"},
      {"{\"format\":\"prism-capture\",\"version\":1,\"events\":[{\"type\":\"dance\"}]}",
       "cap: event 0: unknown event type 'dance'"},
      {"{\"format\":\"prism-capture\",\"version\":1,\"events\":[{\"type\":\"bye\",\"at\":\"x\"}]}",
       "cap: event 0: \"at\" is \"x\", not the expected type"},
      // Found by fuzz/capture_file: a float beyond the field's type was converted (UBSan); an
      // integer beyond it wrapped.
      {"{\"format\":\"prism-capture\",\"version\":1,\"events\":[{\"type\":\"complete\","
       "\"op_id\":1.5e115,\"at\":1}]}",
       "cap: event 0: \"op_id\" is 1.5e+115, not the expected type"},
      {"{\"format\":\"prism-capture\",\"version\":1,\"events\":[{\"type\":\"complete\","
       "\"op_id\":4294967296,\"at\":1}]}",
       "cap: event 0: \"op_id\" is 4294967296, not the expected type"},
      {"{\"format\":\"prism-capture\",\"version\":1,\"events\":[{\"type\":\"comm_info\",\"comm\":1,"
       "\"nranks\":2,\"rank_in_comm\":0,\"members\":[0,318446744073709551616]}]}",
       "cap: event 0: \"members\" is [0,3.1844674407370955e+20], not the expected type"},
      {"{\"format\":\"prism-capture\",\"version\":1,\"events\":[{\"type\":\"compute\",\"at\":1,"
       "\"duration\":1,\"stream\":70000}]}",
       "cap: event 0: stream 70000 outside 0..65535"},
      {"{\"format\":\"prism-capture\",\"version\":1,\"events\":[{\"type\":\"marker\",\"at\":1,"
       "\"marker\":\"lap\"}]}",
       "cap: event 0: unknown marker 'lap'"},
      {"{\"format\":\"prism-capture\",\"version\":1,\"events\":[{\"type\":\"memory\",\"at\":1,"
       "\"action\":\"keep\",\"id\":1}]}",
       "cap: event 0: unknown memory action 'keep'"},
      {"{\"format\":\"prism-capture\",\"version\":1,\"events\":[{\"type\":\"comm_info\",\"comm\":1,"
       "\"nranks\":3,\"rank_in_comm\":0,\"members\":[0,1]}]}",
       "cap: event 0: communicator 1: 3 ranks, 2 members listed"},
      {"{\"format\":\"prism-capture\",\"version\":1,\"events\":[{\"type\":\"bye\",\"at\":" +
           std::string(100000, '[') + std::string(100000, ']') + "}]}",
       "cap: values nested deeper than 64 levels"},
  };
  for (const auto& [text, message] : cases) {
    Result<RankCapture> c = parse_capture_json(text, "cap");
    ASSERT_FALSE(c.is_ok()) << text;
    EXPECT_THAT(c.status().message(), HasSubstr(message)) << text;
  }
}

}  // namespace
}  // namespace prism
