#include "graph/op.h"

#include <gtest/gtest.h>

namespace prism {
namespace {

TEST(OpTest, OpKindNamesRoundTrip) {
  const OpKind kinds[] = {OpKind::kCompute,     OpKind::kCollective, OpKind::kSend,
                          OpKind::kRecv,        OpKind::kAlloc,      OpKind::kFree,
                          OpKind::kEventRecord, OpKind::kEventWait,  OpKind::kMarker};
  for (OpKind k : kinds) {
    ASSERT_NE(to_string(k), "?");
    EXPECT_EQ(parse_op_kind(to_string(k)), k) << to_string(k);
  }
  EXPECT_EQ(to_string(OpKind::kEventWait), "event_wait");
  EXPECT_FALSE(parse_op_kind("Compute").has_value());
  EXPECT_FALSE(parse_op_kind("").has_value());
}

TEST(OpTest, MarkerAndKernelClassNamesRoundTrip) {
  for (MarkerKind k : {MarkerKind::kIteration, MarkerKind::kMicrobatch, MarkerKind::kPhase})
    EXPECT_EQ(parse_marker_kind(to_string(k)), k);
  for (KernelClass k : {KernelClass::kGemm, KernelClass::kAttention, KernelClass::kElementwise,
                        KernelClass::kOther})
    EXPECT_EQ(parse_kernel_class(to_string(k)), k);
  EXPECT_EQ(to_string(MarkerKind::kMicrobatch), "microbatch");
  EXPECT_EQ(to_string(KernelClass::kGemm), "gemm");
  EXPECT_FALSE(parse_marker_kind("epoch").has_value());
  EXPECT_FALSE(parse_kernel_class("conv").has_value());
}

TEST(OpTest, CommunicationKinds) {
  EXPECT_TRUE(is_communication(OpKind::kCollective));
  EXPECT_TRUE(is_communication(OpKind::kSend));
  EXPECT_TRUE(is_communication(OpKind::kRecv));
  EXPECT_FALSE(is_communication(OpKind::kCompute));
  EXPECT_FALSE(is_communication(OpKind::kEventWait));
  EXPECT_FALSE(is_communication(OpKind::kAlloc));
}

TEST(OpTest, DefaultsMatchTheFileFormat) {
  const Op op;
  EXPECT_EQ(op.dtype, DType::kBFloat16);
  EXPECT_EQ(op.arg, 0);
  EXPECT_EQ(op.group, 0u);
  EXPECT_EQ(op.name, kNone);
  EXPECT_EQ(op.cost, kNone);
  EXPECT_EQ(op.deps_begin, op.deps_end);
}

}  // namespace
}  // namespace prism
