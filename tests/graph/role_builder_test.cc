// RoleBuilder: ops appended in issue order, tables interned in order of first
// use, dependencies on the last op.
#include "graph/role_builder.h"

#include <gtest/gtest.h>

namespace prism {
namespace {

TEST(RoleBuilderTest, InternsNamesEventsAndStreamsInOrderOfFirstUse) {
  RoleBuilder b("r", {"compute", "dp"});
  EXPECT_EQ(b.stream("dp"), 1);
  EXPECT_EQ(b.stream("cp"), 2);
  const int a = b.compute(0, SimTime{5}, "gemm");
  const int r = b.record(0, "ready", "event");
  const int w = b.wait(1, "ready", "event");
  const int c = b.compute(0, SimTime{7}, "gemm");
  EXPECT_EQ(b.event("done"), 1);
  EXPECT_EQ(b.role().streams, (std::vector<std::string>{"compute", "dp", "cp"}));
  EXPECT_EQ(b.role().names, (std::vector<std::string>{"gemm", "event"}));
  EXPECT_EQ(b.role().events, (std::vector<std::string>{"ready", "done"}));
  EXPECT_EQ(b.op(a).name, 0);
  EXPECT_EQ(b.op(c).name, 0);
  EXPECT_EQ(b.op(r).ref, 0);
  EXPECT_EQ(b.op(w).ref, 0);
  EXPECT_EQ(b.op(w).kind, OpKind::kEventWait);
  EXPECT_EQ(b.size(), 4);
}

TEST(RoleBuilderTest, AddKeepsTheOpAndDepsGoToTheLastOp) {
  RoleBuilder b("r", {"compute"});
  const int alloc = b.alloc(0, Bytes{64}, "buf");
  Op op;
  op.kind = OpKind::kCompute;
  op.duration = SimTime{3};
  op.name = 0;
  const int i = b.add(op);
  b.add_dep(alloc);
  const int f = b.free_masked(0, alloc, 0b11, "buf");
  const Role role = std::move(b).build();
  EXPECT_EQ(role.ops[static_cast<std::size_t>(i)].name, 0);
  EXPECT_EQ(role.ops[static_cast<std::size_t>(i)].deps_end - role.ops[i].deps_begin, 1u);
  EXPECT_EQ(role.deps, (std::vector<std::int32_t>{alloc}));
  EXPECT_EQ(role.ops[static_cast<std::size_t>(f)].bytes, Bytes{64});
  EXPECT_EQ(role.ops[static_cast<std::size_t>(f)].arg, 0b11);
  EXPECT_EQ(role.ops[static_cast<std::size_t>(f)].deps_begin, 1u);
  EXPECT_EQ(role.names, (std::vector<std::string>{"buf"}));
}

}  // namespace
}  // namespace prism
