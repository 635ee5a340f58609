// The mean of a layout's simulated runs with drawn hops (stages/sim/hop_draws.h): times averaged, counts and
// spans the first run's; one run is itself.
#include "stages/sim/hop_draws.h"

#include <gtest/gtest.h>

namespace conveyor {
namespace {

SimResult run_of(double elapsed, double compute, int64_t plans) {
  SimResult r;
  r.elapsed_s = elapsed;
  r.ttft_p50 = elapsed / 10, r.tpot_p99 = elapsed / 100;
  r.plans = plans;
  r.stages.resize(2);
  r.stages[0].compute_s = compute, r.stages[1].compute_s = 2 * compute;
  r.stages[0].send_s = compute / 4, r.stages[1].allreduce_s = compute / 8, r.stages[1].overhead_s = compute / 16;
  r.spans.push_back(SimSpan{0, plans, false, 0.0, compute, 1});
  return r;
}

TEST(HopDraws, MeanOfTheRunsTimesFirstRunsCounts) {
  const SimResult m = mean_of_draws({run_of(2.0, 1.0, 7), run_of(4.0, 3.0, 9)});
  EXPECT_DOUBLE_EQ(m.elapsed_s, 3.0);
  EXPECT_DOUBLE_EQ(m.ttft_p50, 0.3);
  EXPECT_DOUBLE_EQ(m.tpot_p99, 0.03);
  EXPECT_DOUBLE_EQ(m.stages[0].compute_s, 2.0);
  EXPECT_DOUBLE_EQ(m.stages[1].compute_s, 4.0);
  EXPECT_DOUBLE_EQ(m.stages[0].send_s, 0.5);
  EXPECT_DOUBLE_EQ(m.stages[1].allreduce_s, 0.25);
  EXPECT_DOUBLE_EQ(m.stages[1].overhead_s, 0.125);
  EXPECT_EQ(m.plans, 7);
  ASSERT_EQ(m.spans.size(), 1u);
  EXPECT_EQ(m.spans.front().step, 7);
  const SimResult one = mean_of_draws({run_of(2.0, 1.0, 7)});
  EXPECT_EQ(one.elapsed_s, 2.0);
  EXPECT_EQ(one.stages[1].compute_s, 2.0);
}

TEST(HopDraws, RefusesNoRunsAndUnequalStages) {
  EXPECT_THROW(mean_of_draws({}), std::exception);
  SimResult short_one = run_of(2.0, 1.0, 7);
  short_one.stages.pop_back();
  EXPECT_THROW(mean_of_draws({run_of(2.0, 1.0, 7), short_one}), std::exception);
}

}  // namespace
}  // namespace conveyor
