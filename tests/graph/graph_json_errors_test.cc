// Every rejection of the graph loader names its place: file:line:col for
// malformed JSON, the JSON path for a bad field, role / op / rank for a
// semantic error.
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "graph/graph_json.h"

namespace prism {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr const char* kBase = R"({"format": "prism-graph", "version": 1,
  "layout": {"world_size": 2, "dims": [{"name": "tp", "size": 2}]},
  "slots": [{"name": "tp", "kind": "group", "dims": ["tp"]},
            {"name": "next", "kind": "peer", "dim": "tp", "offset": 1, "wrap": true}],
  "roles": [{"name": "r", "streams": ["s", "c"], "events": ["e"], "ops": [
    {"kind": "compute", "stream": "s", "duration_ns": 10},
    {"kind": "collective", "stream": "c", "collective": "all_reduce", "slot": "tp", "bytes": 64}
  ]}],
  "assign": [{"role": "r", "ranks": "0-1"}]})";

constexpr const char* kBaseOps =
    R"({"kind": "compute", "stream": "s", "duration_ns": 10},
    {"kind": "collective", "stream": "c", "collective": "all_reduce", "slot": "tp", "bytes": 64})";

// kBase with `from` replaced by `to` (which must occur).
std::string with(std::string_view from, std::string_view to, std::string text = kBase) {
  const std::size_t at = text.find(from);
  PRISM_CHECK(at != std::string::npos, std::string(from));
  return text.replace(at, from.size(), to);
}

std::string with_ops(std::string_view ops) {
  return with(kBaseOps, ops);
}

// The message of the rejection of `text`.
std::string error_of(const std::string& text) {
  Result<ExecutionGraph> g = parse_graph_json(text, "g.json");
  if (g.is_ok()) return "(accepted)";
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
  return g.status().message();
}

TEST(GraphJsonErrorsTest, BaseIsValid) {
  EXPECT_EQ(error_of(kBase), "(accepted)");
}

TEST(GraphJsonErrorsTest, MalformedJsonNamesLineAndColumn) {
  const std::string text = "{\"format\": \"prism-graph\",\n  \"version\": 1,\n  \"layout\": x}";
  EXPECT_EQ(error_of(text), "g.json:3:13: malformed JSON: unexpected 'x'");
  EXPECT_THAT(error_of("{\"a\": 1"), StartsWith("g.json:1:8: "));
  EXPECT_THAT(error_of("{\"format\": \"prism-graph\",\n \"version\": 1e400}"),
              AllOf(StartsWith("g.json:2:"), HasSubstr("number out of range: '1e400'")));
}

TEST(GraphJsonErrorsTest, WrongFormatOrVersion) {
  EXPECT_THAT(error_of(with("prism-graph", "chakra")), HasSubstr("g.json: /: not a prism graph"));
  EXPECT_THAT(error_of("[1, 2]"), HasSubstr("g.json: /: expected an object, got an array"));
  EXPECT_THAT(error_of(with("\"version\": 1", "\"version\": 2")),
              HasSubstr("g.json: /version: unsupported version 2 (this build reads version 1)"));
  EXPECT_THAT(error_of(with("\"version\": 1,", "")),
              HasSubstr("/: missing required field \"version\""));
}

TEST(GraphJsonErrorsTest, UnknownFieldsAnywhere) {
  EXPECT_THAT(error_of(with("\"version\": 1,", "\"version\": 1, \"extra\": 0,")),
              HasSubstr("g.json: /: unknown field \"extra\""));
  EXPECT_THAT(error_of(with("\"duration_ns\"", "\"durration_ns\"")),
              HasSubstr("g.json: /roles/0/ops/0: unknown field \"durration_ns\""));
  EXPECT_THAT(error_of(with("\"world_size\": 2", "\"world_size\": 2, \"nodes\": 1")),
              HasSubstr("/layout: unknown field \"nodes\""));
  EXPECT_THAT(error_of(with("\"offset\": 1", "\"offset\": 1, \"step\": 1")),
              HasSubstr("/slots/1: unknown field \"step\""));
  EXPECT_THAT(error_of(with("\"ranks\": \"0-1\"", "\"ranks\": \"0-1\", \"x\": 1")),
              HasSubstr("/assign/0: unknown field \"x\""));
}

TEST(GraphJsonErrorsTest, FieldOfAnotherOpKind) {
  EXPECT_THAT(error_of(with("\"duration_ns\": 10", "\"duration_ns\": 10, \"tag\": 1")),
              HasSubstr("/roles/0/ops/0: field \"tag\" does not apply to a compute op"));
  EXPECT_THAT(error_of(with("\"bytes\": 64", "\"bytes\": 64, \"tag\": 1")),
              HasSubstr("/roles/0/ops/1: field \"tag\" does not apply to a collective op"));
  EXPECT_THAT(error_of(with("\"duration_ns\": 10", "\"duration_ns\": 10, \"group\": 1")),
              HasSubstr("/roles/0/ops/0: field \"group\" does not apply to a compute op"));
  EXPECT_THAT(error_of(with("\"duration_ns\": 10", "\"duration_ns\": 10, \"transport\": \"nccl\"")),
              HasSubstr("/roles/0/ops/0: field \"transport\" does not apply to a compute op"));
}

TEST(GraphJsonErrorsTest, UnknownEnumNamesListValidOnes) {
  EXPECT_THAT(error_of(with("\"bytes\": 64", "\"bytes\": 64, \"transport\": \"nvshmem\"")),
              HasSubstr("/roles/0/ops/1/transport: unknown transport \"nvshmem\" (valid: nccl, "
                        "userbuffers)"));
  EXPECT_THAT(error_of(with("\"all_reduce\"", "\"allreduce\"")),
              HasSubstr("/roles/0/ops/1/collective: unknown collective \"allreduce\" (valid: "
                        "all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all, "
                        "barrier)"));
  EXPECT_THAT(error_of(with("\"kind\": \"compute\"", "\"kind\": \"kernel\"")),
              HasSubstr("/roles/0/ops/0/kind: unknown op kind \"kernel\" (valid: compute, "
                        "collective, send, recv, alloc, free, event_record, event_wait, marker)"));
  EXPECT_THAT(error_of(with("\"bytes\": 64", "\"bytes\": 64, \"dtype\": \"f32\"")),
              HasSubstr("/roles/0/ops/1/dtype: unknown dtype \"f32\" (valid: fp32, fp16, bf16"));
  EXPECT_THAT(error_of(with_ops(R"({"kind": "marker", "stream": "s", "marker": "epoch"})")),
              HasSubstr("/roles/0/ops/0/marker: unknown marker \"epoch\" (valid: iteration, "
                        "microbatch, phase, iteration_end)"));
  EXPECT_THAT(
      error_of(with_ops(R"({"kind": "compute", "stream": "s", "cost": {"class": "conv"}})")),
      HasSubstr("/roles/0/ops/0/cost/class: unknown kernel class \"conv\" (valid: gemm, "
                "attention, elementwise, other)"));
  EXPECT_THAT(error_of(with("\"kind\": \"peer\"", "\"kind\": \"p2p\"")),
              HasSubstr("/slots/1/kind: unknown slot kind \"p2p\" (valid: group, peer)"));
}

TEST(GraphJsonErrorsTest, IntegersMustBeNonNegativeIntegers) {
  EXPECT_THAT(error_of(with("\"bytes\": 64", "\"bytes\": 64.5")),
              HasSubstr("/roles/0/ops/1/bytes: expected a non-negative integer, got a float"));
  EXPECT_THAT(error_of(with("\"bytes\": 64", "\"bytes\": 64.0")),
              HasSubstr("/roles/0/ops/1/bytes: expected a non-negative integer, got a float"));
  EXPECT_THAT(error_of(with("\"duration_ns\": 10", "\"duration_ns\": -10")),
              HasSubstr("/roles/0/ops/0/duration_ns: must not be negative, got -10"));
  EXPECT_THAT(error_of(with("\"bytes\": 64", "\"bytes\": \"64\"")),
              HasSubstr("/roles/0/ops/1/bytes: expected a non-negative integer, got a string"));
  EXPECT_THAT(error_of(with("\"bytes\": 64", "\"bytes\": 64, \"root\": -1")),
              HasSubstr("/roles/0/ops/1/root: must not be negative"));
  EXPECT_THAT(error_of(with("\"bytes\": 64", "\"bytes\": 64, \"group\": 4294967296")),
              HasSubstr("/roles/0/ops/1/group: 4294967296 is out of range"));
  EXPECT_THAT(error_of(with("\"bytes\": 64", "\"bytes\": 18446744073709551615")),
              HasSubstr("/roles/0/ops/1/bytes: 18446744073709551615 is out of range"));
}

TEST(GraphJsonErrorsTest, DuplicateFieldsAreRejected) {
  EXPECT_THAT(error_of(with("\"duration_ns\": 10", "\"duration_ns\": 100, \"duration_ns\": -5")),
              HasSubstr("g.json: /roles/0/ops/0: duplicate field \"duration_ns\""));
  EXPECT_THAT(error_of(with("\"version\": 1,", "\"version\": 1, \"version\": 1,")),
              HasSubstr("g.json: /: duplicate field \"version\""));
  EXPECT_THAT(error_of(with("{\"name\": \"tp\", \"size\": 2}",
                            "{\"name\": \"tp\", \"size\": 2, \"name\": \"pp\"}")),
              HasSubstr("g.json: /layout/dims/0: duplicate field \"name\""));
  EXPECT_THAT(
      error_of(with_ops(
          R"({"kind": "compute", "stream": "s", "cost": {"class": "gemm", "flops": 1, "flops": 2}})")),
      HasSubstr("g.json: /roles/0/ops/0/cost: duplicate field \"flops\""));
  EXPECT_THAT(error_of(with("\"ranks\": \"0-1\"", "\"where\": {\"tp\": 0, \"tp\": 1}")),
              HasSubstr("g.json: /assign/0/where: duplicate field \"tp\""));
}

TEST(GraphJsonErrorsTest, DeepNestingIsRejectedNotACrash) {
  // 100,000 nested arrays under a key, with more members after it.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_THAT(error_of(with("\"version\": 1,", "\"version\": 1, \"x\": " + deep + ",")),
              HasSubstr("g.json: values nested deeper than 64 levels"));
}

TEST(GraphJsonErrorsTest, ValuesPastTheLimitsAreRejected) {
  EXPECT_EQ(error_of(with("\"duration_ns\": 10", "\"duration_ns\": 1125899906842624")),
            "(accepted)");
  EXPECT_THAT(error_of(with("\"duration_ns\": 10", "\"duration_ns\": 1125899906842625")),
              HasSubstr("g.json: /roles/0/ops/0/duration_ns: 1125899906842625 exceeds the limit "
                        "of 1125899906842624 (2^50 ns, about 13 days)"));
  EXPECT_THAT(error_of(with("\"bytes\": 64", "\"bytes\": 1125899906842625")),
              HasSubstr("g.json: /roles/0/ops/1/bytes: 1125899906842625 exceeds the limit of "
                        "1125899906842624 (2^50, 1 PiB)"));
  EXPECT_THAT(error_of(with_ops(R"({"kind": "alloc", "stream": "s", "bytes": 2000000000000000})")),
              HasSubstr("g.json: /roles/0/ops/0/bytes: 2000000000000000 exceeds the limit"));
  EXPECT_THAT(
      error_of(with_ops(
          R"({"kind": "compute", "stream": "s", "cost": {"class": "gemm", "flops": 1e31}})")),
      HasSubstr("g.json: /roles/0/ops/0/cost/flops: must be a finite number >= 0 and <= 1e+30"));
  EXPECT_THAT(
      error_of(with_ops(
          R"({"kind": "compute", "stream": "s", "cost": {"class": "gemm", "bytes": 1125899906842625}})")),
      HasSubstr("g.json: /roles/0/ops/0/cost/bytes: 1125899906842625 exceeds the limit"));
  const std::string tail = "\"assign\": [{\"role\": \"r\", \"ranks\": \"0-1\"}]";
  EXPECT_EQ(
      error_of(with(tail, tail + ", \"overrides\": [{\"rank\": 1, \"compute_scale\": 1000}]")),
      "(accepted)");
  EXPECT_THAT(
      error_of(with(tail, tail + ", \"overrides\": [{\"rank\": 1, \"compute_scale\": 1000.5}]")),
      HasSubstr("g.json: /overrides/0/compute_scale: 1000.5 exceeds the limit of 1000"));
}

TEST(GraphJsonErrorsTest, ComputeNeedsExactlyOneOfDurationAndCost) {
  EXPECT_THAT(error_of(with_ops(R"({"kind": "compute", "stream": "s"})")),
              HasSubstr("/roles/0/ops/0: a compute op needs exactly one of \"duration_ns\" and "
                        "\"cost\""));
  EXPECT_THAT(
      error_of(with("\"duration_ns\": 10", "\"duration_ns\": 10, \"cost\": {\"class\": \"gemm\"}")),
      HasSubstr("/roles/0/ops/0: a compute op needs exactly one"));
  EXPECT_THAT(error_of(with_ops(
                  R"({"kind": "compute", "stream": "s", "cost": {"class": "gemm", "flops": -1}})")),
              HasSubstr("/roles/0/ops/0/cost/flops: must be a finite number >= 0"));
}

TEST(GraphJsonErrorsTest, MissingRequiredOpField) {
  EXPECT_THAT(error_of(with(", \"bytes\": 64", "")),
              HasSubstr("/roles/0/ops/1: missing required field \"bytes\""));
  EXPECT_THAT(error_of(with_ops(R"({"kind": "free", "stream": "s"})")),
              HasSubstr("/roles/0/ops/0: missing required field \"alloc\""));
}

TEST(GraphJsonErrorsTest, UnknownStreamSlotOrEvent) {
  EXPECT_THAT(error_of(with("\"stream\": \"c\"", "\"stream\": \"nccl\"")),
              HasSubstr("/roles/0/ops/1/stream: unknown stream \"nccl\" (defined: s, c)"));
  EXPECT_THAT(error_of(with("\"slot\": \"tp\"", "\"slot\": \"dp\"")),
              HasSubstr("/roles/0/ops/1/slot: unknown slot \"dp\" (defined: tp, next)"));
  EXPECT_THAT(error_of(with_ops(R"({"kind": "event_record", "stream": "s", "event": "f"})")),
              HasSubstr("/roles/0/ops/0/event: unknown event \"f\" (defined: e)"));
}

TEST(GraphJsonErrorsTest, SlotOfTheWrongKind) {
  EXPECT_THAT(error_of(with("\"slot\": \"tp\"", "\"slot\": \"next\"")),
              HasSubstr("/roles/0/ops/1/slot: \"next\" is a peer slot; a collective op needs a "
                        "group slot"));
  EXPECT_THAT(
      error_of(with_ops(R"({"kind": "send", "stream": "c", "slot": "tp", "bytes": 1})")),
      HasSubstr("/roles/0/ops/0/slot: \"tp\" is a group slot; a send op needs a peer slot"));
}

TEST(GraphJsonErrorsTest, DepsMustNameOtherOps) {
  EXPECT_THAT(error_of(with("\"duration_ns\": 10", "\"duration_ns\": 10, \"deps\": [1, 2]")),
              HasSubstr("/roles/0/ops/0/deps/1: op 2 does not exist (the role has 2 ops)"));
  EXPECT_THAT(error_of(with("\"duration_ns\": 10", "\"duration_ns\": 10, \"deps\": [0]")),
              HasSubstr("/roles/0/ops/0/deps/0: an op cannot depend on itself"));
  EXPECT_THAT(error_of(with("\"duration_ns\": 10", "\"duration_ns\": 10, \"deps\": 1")),
              HasSubstr("/roles/0/ops/0/deps: expected an array, got an integer"));
}

TEST(GraphJsonErrorsTest, LayoutRejections) {
  EXPECT_THAT(
      error_of(with("\"size\": 2", "\"size\": 4")),
      HasSubstr("/layout/dims: the product of the dim sizes (4) must equal world_size (2)"));
  EXPECT_THAT(error_of(with("\"world_size\": 2", "\"world_size\": 0")),
              HasSubstr("/layout/world_size: 0 is out of range"));
  // Bounded work (issue 26): 10^9 ranks are refused before any per-rank table.
  EXPECT_THAT(error_of(with("\"world_size\": 2", "\"world_size\": 1000000000")),
              HasSubstr("/layout/world_size: 1000000000 is out of range [1, 4194304]"));
  EXPECT_THAT(error_of(with("\"world_size\": 2", "\"world_size\": 2, \"gpus_per_node\": 0")),
              HasSubstr("/layout/gpus_per_node: 0 is out of range"));
  EXPECT_THAT(error_of(with("{\"name\": \"tp\", \"size\": 2}",
                            "{\"name\": \"tp\", \"size\": 2}, {\"name\": \"tp\", \"size\": 1}")),
              HasSubstr("g.json: layout: dim 'tp' appears twice"));
}

TEST(GraphJsonErrorsTest, SlotRejections) {
  EXPECT_THAT(error_of(with("\"dims\": [\"tp\"]", "\"dims\": [\"pp\"]")),
              HasSubstr("/slots/0/dims/0: unknown dim \"pp\" (layout dims: tp)"));
  EXPECT_THAT(error_of(with("\"dims\": [\"tp\"]", "\"dims\": [\"tp\", \"tp\"]")),
              HasSubstr("slot 'tp': dim 'tp' listed twice"));
  EXPECT_THAT(error_of(with("\"offset\": 1", "\"offset\": 0")),
              HasSubstr("/slots/1/offset: must not be 0"));
  EXPECT_THAT(error_of(with("\"dims\": [\"tp\"]", "\"dims\": [\"tp\"], \"groups\": [[0]]")),
              HasSubstr("/slots/0: a group slot needs exactly one of \"dims\" and \"groups\""));
  EXPECT_THAT(error_of(with("\"dims\": [\"tp\"]", "\"groups\": [[0, 2]]")),
              HasSubstr("/slots/0/groups/0/1: 2 is out of range [0, 1]"));
  EXPECT_THAT(error_of(with("\"dims\": [\"tp\"]", "\"groups\": [[0, 1, 0]]")),
              HasSubstr("slot 'tp': group 0 lists rank 0 twice"));
  EXPECT_THAT(error_of(with("\"dims\": [\"tp\"]", "\"groups\": [[0, 1], [1]]")),
              HasSubstr("slot 'tp': rank 1 is in group 0 and group 1"));
  EXPECT_THAT(error_of(with("\"dim\": \"tp\", \"offset\": 1, \"wrap\": true", "\"peers\": [1]")),
              HasSubstr("/slots/1/peers: must list one peer per rank: 1 entries for world_size 2"));
  EXPECT_THAT(error_of(with("\"dim\": \"tp\", \"offset\": 1, \"wrap\": true", "\"peers\": [1, 1]")),
              HasSubstr("/slots/1/peers/1: a rank cannot be its own peer"));
  EXPECT_THAT(error_of(with("{\"name\": \"next\"", "{\"name\": \"tp\"")),
              HasSubstr("slot 'tp' is defined twice"));
}

TEST(GraphJsonErrorsTest, RoleRejections) {
  EXPECT_THAT(error_of(with("\"streams\": [\"s\", \"c\"]", "\"streams\": [\"s\", \"c\", \"s\"]")),
              HasSubstr("g.json: role 'r': stream 's' is defined twice"));
  EXPECT_THAT(error_of(with("\"streams\": [\"s\", \"c\"], ", "")),
              HasSubstr("/roles/0: missing required field \"streams\""));
}

TEST(GraphJsonErrorsTest, AssignRejections) {
  EXPECT_THAT(error_of(with("{\"role\": \"r\"", "{\"role\": \"q\"")),
              HasSubstr("/assign/0/role: unknown role \"q\""));
  EXPECT_THAT(error_of(with("\"0-1\"", "\"0-2\"")),
              HasSubstr("/assign/0/ranks: rank 2 is outside [0, 2)"));
  EXPECT_THAT(error_of(with("\"0-1\"", "\"1\"")), HasSubstr("g.json: rank 0 has no role"));
  EXPECT_THAT(error_of(with("\"ranks\": \"0-1\"}",
                            "\"ranks\": \"0-1\"}, {\"role\": \"r\", "
                            "\"where\": {\"tp\": 1}}")),
              HasSubstr("/assign/1: rank 1 is assigned to role 'r' here but already to role 'r' "
                        "by /assign/0"));
  EXPECT_THAT(error_of(with("\"ranks\": \"0-1\"", "\"where\": {\"pp\": 0}")),
              HasSubstr("/assign/0/where/pp: unknown dim \"pp\""));
  EXPECT_THAT(error_of(with("\"ranks\": \"0-1\"", "\"where\": {\"tp\": 2}")),
              HasSubstr("/assign/0/where/tp: 2 is out of range [0, 1]"));
}

TEST(GraphJsonErrorsTest, OverrideRejections) {
  const std::string tail = "\"assign\": [{\"role\": \"r\", \"ranks\": \"0-1\"}]";
  EXPECT_THAT(error_of(with(tail, tail + ", \"overrides\": [{\"rank\": 1, \"compute_scale\": 0}]")),
              HasSubstr("/overrides/0/compute_scale: must be a number > 0"));
  EXPECT_THAT(
      error_of(with(tail, tail + ", \"overrides\": [{\"rank\": 1, \"compute_scale\": 1e-9}]")),
      HasSubstr("/overrides/0/compute_scale: rounds to 0 parts per million"));
  EXPECT_THAT(error_of(with(tail, tail + ", \"overrides\": [{\"rank\": 2, \"compute_scale\": 1}]")),
              HasSubstr("/overrides/0/rank: 2 is out of range [0, 1]"));
  EXPECT_THAT(error_of(with(tail, tail + ", \"overrides\": [{\"rank\": 1, \"compute_scale\": 1}, "
                                         "{\"rank\": 1, \"compute_scale\": 2}]")),
              HasSubstr("/overrides: rank 1 has two overrides"));
}

TEST(GraphJsonErrorsTest, RecordStreamsMustNameStreams) {
  const std::string alloc = R"({"kind": "alloc", "stream": "s", "bytes": 8},
          )";
  EXPECT_THAT(
      error_of(with_ops(alloc +
                        R"({"kind": "free", "stream": "s", "alloc": 0, "record_streams": ["x"]})")),
      HasSubstr("/roles/0/ops/1/record_streams/0: unknown stream \"x\" (defined: s, c)"));
  EXPECT_THAT(error_of(with_ops(
                  alloc + R"({"kind": "free", "stream": "s", "alloc": 0, "record_streams": [1]})")),
              HasSubstr("/roles/0/ops/1/record_streams/0: expected a stream name"));
  EXPECT_THAT(error_of(with_ops(
                  alloc + R"({"kind": "free", "stream": "s", "alloc": 0, "record_streams": "c"})")),
              HasSubstr("/roles/0/ops/1/record_streams"));
  EXPECT_THAT(error_of(with_ops(
                  R"({"kind": "alloc", "stream": "s", "bytes": 8, "record_streams": ["c"]})")),
              HasSubstr("field \"record_streams\" does not apply to a alloc op"));
  EXPECT_EQ(
      error_of(with_ops(
          alloc + R"({"kind": "free", "stream": "s", "alloc": 0, "record_streams": ["c", "s"]})")),
      "(accepted)");
}

TEST(GraphJsonErrorsTest, SemanticErrorsNameRoleAndOp) {
  EXPECT_THAT(error_of(with_ops(R"({"kind": "event_wait", "stream": "s", "event": "e"})")),
              HasSubstr("g.json: role 'r' op 0: event_wait on event 'e' with no earlier "
                        "event_record"));
  const std::string cyclic =
      with("\"bytes\": 64", "\"bytes\": 64, \"deps\": [0]",
           with("\"duration_ns\": 10", "\"duration_ns\": 10, \"deps\": [1]"));
  EXPECT_THAT(error_of(cyclic),
              HasSubstr("g.json: role 'r': dependency cycle: op 0 -> op 1 -> op 0"));
  EXPECT_THAT(
      error_of(with_ops(R"({"kind": "send", "stream": "c", "slot": "next", "bytes": 8, "group": 1},
          {"kind": "compute", "stream": "s", "duration_ns": 5, "deps": [0]},
          {"kind": "recv", "stream": "c", "slot": "next", "bytes": 8, "group": 1, "deps": [1]})")),
      HasSubstr("g.json: role 'r': NCCL group 1 on stream 'c' (ops 0, 2) depends on itself "
                "through op 1"));
  EXPECT_THAT(error_of(with_ops(R"({"kind": "alloc", "stream": "s", "bytes": 8},
          {"kind": "free", "stream": "c", "alloc": 0})")),
              HasSubstr("g.json: role 'r' op 1: free of op 0 (alloc on stream 's') is not ordered "
                        "after it"));
  const std::string self_peer = with("\"offset\": 1", "\"offset\": 2");  // wraps to the rank
  EXPECT_EQ(error_of(self_peer), "(accepted)");                          // while unused
  EXPECT_THAT(
      error_of(with(kBaseOps, R"({"kind": "send", "stream": "c", "slot": "next", "bytes": 8},
          {"kind": "recv", "stream": "c", "slot": "next", "bytes": 8})",
                    self_peer)),
      HasSubstr("g.json: rank 0 (role 'r') op 0: slot 'next' resolves to the rank itself"));
}

}  // namespace
}  // namespace prism
