#include "net/max_min_solver.h"

#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace prism {
namespace {

using D = MaxMinSolver::Demand;

TEST(MaxMinSolver, EqualFlowsShareEqually) {
  MaxMinSolver s;
  const auto r = s.add_resource(10);
  std::vector<MaxMinSolver::FlowId> f;
  for (int i = 0; i < 4; ++i) f.push_back(s.add_flow(std::vector<D>{{r, 10}}));
  std::vector<MaxMinSolver::FlowId> touched;
  s.solve(&touched);
  EXPECT_EQ(touched.size(), 4u);
  for (auto id : f) EXPECT_DOUBLE_EQ(s.rate(id), 0.25);
}

TEST(MaxMinSolver, FlowAloneRunsAtFullSpeed) {
  MaxMinSolver s;
  const auto r = s.add_resource(10);
  const auto f = s.add_flow(std::vector<D>{{r, 4}});
  std::vector<MaxMinSolver::FlowId> touched;
  s.solve(&touched);
  EXPECT_DOUBLE_EQ(s.rate(f), 1.0);
}

// Classic max-min: B is held by its own bottleneck r2, A takes what B leaves on r1.
TEST(MaxMinSolver, BottleneckElsewhereLeavesTheRest) {
  MaxMinSolver s;
  const auto r1 = s.add_resource(10), r2 = s.add_resource(2);
  const auto a = s.add_flow(std::vector<D>{{r1, 10}});
  const auto b = s.add_flow(std::vector<D>{{r1, 10}, {r2, 10}});
  std::vector<MaxMinSolver::FlowId> touched;
  s.solve(&touched);
  EXPECT_DOUBLE_EQ(s.rate(b), 0.2);
  EXPECT_DOUBLE_EQ(s.rate(a), 0.8);
  // B leaves: A gets everything; only A's component is touched.
  s.remove_flow(b);
  touched.clear();
  s.solve(&touched);
  EXPECT_EQ(touched, std::vector<MaxMinSolver::FlowId>{a});
  EXPECT_DOUBLE_EQ(s.rate(a), 1.0);
}

TEST(MaxMinSolver, OnlyTheChangedComponentIsTouched) {
  MaxMinSolver s;
  const auto r1 = s.add_resource(1), r2 = s.add_resource(1);
  const auto a = s.add_flow(std::vector<D>{{r1, 1}});
  s.add_flow(std::vector<D>{{r2, 1}});
  std::vector<MaxMinSolver::FlowId> touched;
  s.solve(&touched);
  touched.clear();
  const auto c = s.add_flow(std::vector<D>{{r1, 1}});
  s.solve(&touched);
  EXPECT_EQ(touched, (std::vector<MaxMinSolver::FlowId>{a, c}));
  EXPECT_DOUBLE_EQ(s.rate(a), 0.5);
}

// Property: on random networks no resource is over capacity, and every flow
// is either at full speed or crosses a full resource on which no other flow
// runs faster (the max-min condition).
TEST(MaxMinSolver, PropertyFeasibleAndMaxMinFair) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 50; ++trial) {
    MaxMinSolver s;
    const int nr = 2 + static_cast<int>(rng() % 20);
    for (int i = 0; i < nr; ++i) s.add_resource(1.0 + static_cast<double>(rng() % 100));
    std::vector<std::vector<D>> demands;
    std::vector<MaxMinSolver::FlowId> ids;
    const int nf = 1 + static_cast<int>(rng() % 60);
    for (int i = 0; i < nf; ++i) {
      std::vector<D> d;
      for (int r = 0; r < nr; ++r)
        if (rng() % 4 == 0) d.push_back(D{r, 0.5 + static_cast<double>(rng() % 50)});
      if (d.empty()) d.push_back(D{static_cast<int>(rng() % nr), 1.0});
      ids.push_back(s.add_flow(d));
      demands.push_back(d);
    }
    // Remove a few, to exercise removal.
    for (int i = 0; i < nf / 5; ++i) {
      s.remove_flow(ids[i]);
      demands[i].clear();
    }
    std::vector<MaxMinSolver::FlowId> touched;
    s.solve(&touched);
    std::vector<double> load(nr, 0.0);
    for (int i = nf / 5; i < nf; ++i)
      for (const D& d : demands[i]) load[d.resource] += d.use * s.rate(ids[i]);
    for (int r = 0; r < nr; ++r) EXPECT_LE(load[r], s.capacity(r) * (1 + 1e-9)) << trial;
    for (int i = nf / 5; i < nf; ++i) {
      const double x = s.rate(ids[i]);
      ASSERT_GT(x, 0);
      if (x >= 1.0 - 1e-12) continue;
      bool bottleneck = false;
      for (const D& d : demands[i]) {
        if (load[d.resource] < s.capacity(d.resource) * (1 - 1e-9)) continue;
        bool fastest = true;
        for (int j = nf / 5; j < nf; ++j)
          for (const D& e : demands[j])
            if (e.resource == d.resource && s.rate(ids[j]) > x * (1 + 1e-9)) fastest = false;
        bottleneck = bottleneck || fastest;
      }
      EXPECT_TRUE(bottleneck) << "trial " << trial << " flow " << i;
    }
  }
}

}  // namespace
}  // namespace prism
