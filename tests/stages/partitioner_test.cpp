// Partitioner: the min-max split is optimal (checked against brute force on random costs), overrides are
// validated, and the planner gives the last stage of Llama-3-70B fewer layers (it also runs the LM head).
#include "stages/partitioner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <random>

#include "runtime/error.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

double max_stage(const std::vector<double>& cost, const std::vector<int>& counts, double first, double last) {
  double worst = 0;
  size_t i = 0;
  for (size_t s = 0; s < counts.size(); ++s) {
    double t = (s == 0 ? first : 0.0) + (s + 1 == counts.size() ? last : 0.0);
    for (int k = 0; k < counts[s]; ++k) t += cost[i++];
    worst = std::max(worst, t);
  }
  return worst;
}

double brute_force(const std::vector<double>& cost, int stages, double first, double last) {
  double best = 1e300;
  std::vector<int> counts(stages);
  std::function<void(int, int)> rec = [&](int s, int left) {
    if (s == stages - 1) {
      if (left < 1) return;
      counts[s] = left;
      best = std::min(best, max_stage(cost, counts, first, last));
      return;
    }
    for (int c = 1; c <= left - (stages - 1 - s); ++c) {
      counts[s] = c;
      rec(s + 1, left - c);
    }
  };
  rec(0, static_cast<int>(cost.size()));
  return best;
}

TEST(Partitioner, MinMaxSplitIsOptimal) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    int n = 1 + static_cast<int>(rng() % 11);
    int stages = 1 + static_cast<int>(rng() % n);
    std::vector<float> r = testing::random_floats(n + 2, 100 + trial, 0.1f, 3.0f);
    std::vector<double> cost(r.begin(), r.begin() + n);
    std::vector<int> counts = min_max_split(cost, stages, r[n], r[n + 1]);
    ASSERT_EQ(static_cast<int>(counts.size()), stages);
    EXPECT_EQ(std::accumulate(counts.begin(), counts.end(), 0), n);
    for (int c : counts) EXPECT_GE(c, 1);
    EXPECT_NEAR(max_stage(cost, counts, r[n], r[n + 1]), brute_force(cost, stages, r[n], r[n + 1]), 1e-9)
        << "trial " << trial;
  }
  EXPECT_THROW(min_max_split({1.0, 1.0}, 3, 0, 0), Error);
}

TEST(Partitioner, OverrideIsChecked) {
  EXPECT_NO_THROW(check_partition({1, 3, 1}, 3, 5));
  EXPECT_THROW(check_partition({2, 3}, 3, 5), Error);
  EXPECT_THROW(check_partition({2, 0, 3}, 3, 5), Error);
  try {
    check_partition({2, 2, 2}, 3, 5);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sums to 6 layers but the model has 5"), std::string::npos) << e.what();
  }
}

ModelSpec llama3_70b() {
  return load_model_spec(testing::source_dir() + "/configs/models/llama-3-70b.yaml");
}

TEST(Partitioner, Llama70bLastStageGetsFewerLayers) {
  ModelSpec spec = llama3_70b();
  Workload w;
  w.pipeline = 4;
  w.tensor = 2;
  PartitionPlan plan = plan_partition(spec, w, DeviceCeilings{}, {});
  ASSERT_EQ(plan.stages.size(), 4u);
  ASSERT_TRUE(plan.fits) << plan.why_not;
  int last = plan.stages[3].last_layer - plan.stages[3].first_layer;
  for (int s = 0; s < 3; ++s) EXPECT_LT(last, plan.stages[s].last_layer - plan.stages[s].first_layer);
  EXPECT_EQ(plan.stages[3].last_layer, 80);
  // Bubbles: the busiest stage has none; none is negative.
  double min_bubble = 1;
  for (const auto& c : plan.stages) {
    EXPECT_GE(c.bubble, -1e-12);
    min_bubble = std::min(min_bubble, c.bubble);
  }
  EXPECT_NEAR(min_bubble, 0.0, 1e-12);
}

TEST(Partitioner, SeventyBillionDoesNotFitOneGpu) {
  Workload w;
  PartitionPlan plan = plan_partition(llama3_70b(), w, DeviceCeilings{}, {});
  EXPECT_FALSE(plan.fits);
  EXPECT_NE(plan.why_not.find("stage 0"), std::string::npos) << plan.why_not;
}

TEST(Partitioner, UserPartitionIsUsed) {
  Workload w;
  w.pipeline = 4;
  w.tensor = 2;
  PartitionPlan plan = plan_partition(llama3_70b(), w, DeviceCeilings{}, {10, 30, 30, 10});
  EXPECT_EQ(plan.stages[1].first_layer, 10);
  EXPECT_EQ(plan.stages[3].first_layer, 70);
  EXPECT_GT(plan.stages[3].bubble, plan.stages[1].bubble);
}

}  // namespace
}  // namespace conveyor
