// step_anatomy over synthetic stamps: the steady decode steps of the most common batch size (its first
// two skipped as warm-up, the last one without a next start left out), the host phases summing to the
// period, the device spans and the device's idle time, and the median step as the example.
#include <gtest/gtest.h>

#include "stages/step_anatomy.h"

namespace conveyor {
namespace {

// Step s starting at t: schedule 10 us, apply 5, forward 100 (metadata 20 inside), sample
// 300, wait 5, post 30, the rest "other"; on the device metadata from t + 15, forward 250 us from
// t + 40, sampling 50 after.
void add_step(StepStamps& st, int64_t s, double t, int64_t seqs, bool decode) {
  const double us = 1e-6;
  st.add(s, "schedule", t, t + 10 * us);
  st.add(s, "apply", t + 10 * us, t + 15 * us);
  st.add(s, "forward", t + 15 * us, t + 115 * us);
  st.add(s, "metadata", t + 15 * us, t + 35 * us);
  st.add(s, "sample", t + 115 * us, t + 415 * us);
  st.add(s, "wait", t + 415 * us, t + 420 * us);
  st.add(s, "post", t + 420 * us, t + 450 * us);
  st.add(s, "gpu metadata", t + 15 * us, t + 40 * us, true);
  st.add(s, "gpu forward", t + 40 * us, t + 290 * us, true);
  st.add(s, "gpu sample", t + 290 * us, t + 340 * us, true);
  st.shape(s, StepShape{seqs, decode ? seqs : seqs * 16, decode});
}

TEST(StepAnatomy, AccountsForTheSteadyDecodePeriod) {
  StepStamps st;
  double t = 0;
  add_step(st, 0, t, 4, false);  // a prefill
  t += 2e-3;
  const double periods[] = {900e-6, 800e-6, 500e-6, 520e-6, 510e-6, 700e-6};
  for (int i = 0; i < 6; ++i) {  // decode steps 1..6 of batch 4; 1 and 2 are warm-up, 6 has no next start
    add_step(st, 1 + i, t, 4, true);
    t += periods[i];
  }
  add_step(st, 7, t, 2, true);  // a smaller batch once: not the common size
  const nlohmann::json a = step_anatomy(st);
  ASSERT_EQ(a["steps"], 4);  // steps 3, 4, 5, 6 (6's period ends at step 7's start)
  EXPECT_EQ(a["batch"], 4);
  const double period = (500 + 520 + 510 + 700) / 4.0;
  EXPECT_NEAR(a["period_us"].get<double>(), period, 1e-6);
  std::map<std::string, double> mean;
  double host = 0, pct = 0;
  for (const auto& p : a["phases"]) {
    mean[p["phase"]] = p["mean_us"];
    if (p["side"] == "host") host += p["mean_us"].get<double>(), pct += p["pct"].get<double>();
  }
  EXPECT_NEAR(mean["schedule"], 10, 1e-6);
  EXPECT_NEAR(mean["metadata"], 20, 1e-6);
  EXPECT_NEAR(mean["forward"], 80, 1e-6);  // the forward call less its metadata
  EXPECT_NEAR(mean["sample"], 300, 1e-6);
  EXPECT_NEAR(mean["other"], period - 450, 1e-6);
  EXPECT_NEAR(host, period, 1e-6);
  EXPECT_NEAR(pct, 100, 1e-6);
  EXPECT_NEAR(mean["gpu forward"], 250, 1e-6);
  EXPECT_NEAR(mean["gpu sample"], 50, 1e-6);
  EXPECT_NEAR(mean["gpu metadata"], 25, 1e-6);
  EXPECT_NEAR(a["device_idle_us"].get<double>(), period - 325, 1e-6);
  const auto& ex = a["example"];
  EXPECT_EQ(ex["step"], 4);  // periods 500 (3), 510 (5), 520 (4), 700 (6): the upper median
  EXPECT_NEAR(ex["spans"][0]["begin_us"].get<double>(), 0, 1e-9);
  EXPECT_NE(format_step_anatomy(a).find("device idle"), std::string::npos);
}

TEST(StepAnatomy, SaysWhyWhenNoStepIsSteady) {
  StepStamps st;
  add_step(st, 0, 0, 4, false);
  add_step(st, 1, 1e-3, 4, true);
  const nlohmann::json a = step_anatomy(st);
  EXPECT_EQ(a["steps"], 0);
  EXPECT_NE(format_step_anatomy(a).find("no steady decode step"), std::string::npos);
}

}  // namespace
}  // namespace conveyor
