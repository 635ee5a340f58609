// The progress line's text, and when the reporter draws it on a terminal and in a log file.
#include "runtime/batch/progress.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

namespace conveyor {
namespace {

TEST(Progress, FormatsDurations) {
  EXPECT_EQ(format_duration(0), "0s");
  EXPECT_EQ(format_duration(42.4), "42s");
  EXPECT_EQ(format_duration(65), "1m05s");
  EXPECT_EQ(format_duration(7380), "2h03m");
  EXPECT_EQ(format_duration(-1), "--");
  EXPECT_EQ(format_duration(NAN), "--");
}

TEST(Progress, FormatsTheLine) {
  ProgressSnapshot s;
  s.total = 1000;
  s.resumed = 100;
  s.done = 130;
  s.failed = 3;
  s.output_tokens = 50370;
  s.elapsed_s = 62;
  // 130 req in 62 s -> 2.0968 req/s; 770 left -> 367.2 s
  EXPECT_EQ(format_progress_line(s),
            "progress 230/1000 (23.0%) | 100 resumed | 3 failed | 812.4 out tok/s | 2.10 req/s | elapsed 1m02s | "
            "ETA 6m07s");
  ProgressSnapshot start;
  start.total = 5;
  EXPECT_EQ(format_progress_line(start), "progress 0/5 (0.0%) | 0.0 out tok/s | 0.00 req/s | elapsed 0s | ETA --");
  start.done = 5;
  start.elapsed_s = 10;
  start.output_tokens = 33;
  EXPECT_EQ(format_progress_line(start), "progress 5/5 (100.0%) | 3.3 out tok/s | 0.50 req/s | elapsed 10s | ETA 0s");
}

// Tokens of unfinished requests count in the rate at once, and the ETA takes the work already done on
// them off what is left, so it does not grow while every request is still running.
TEST(Progress, CountsTokensAsTheyAreMadeAndTheEtaSubtractsThem) {
  ProgressSnapshot s;
  s.total = 10;
  s.output_tokens = 50;  // nothing finished yet
  s.elapsed_s = 5;
  EXPECT_EQ(format_progress_line(s), "progress 0/10 (0.0%) | 10.0 out tok/s | 0.00 req/s | elapsed 5s | ETA --");
  s.done = 2;
  s.finished_output_tokens = 100;  // 50 tokens per finished request
  s.output_tokens = 300;           // 200 more made for the 8 still running
  s.elapsed_s = 10;
  // 8 x 50 - 200 = 200 tokens left at 30 tok/s (a request-rate ETA would say 8 / 0.2 = 40 s)
  EXPECT_EQ(format_progress_line(s), "progress 2/10 (20.0%) | 30.0 out tok/s | 0.20 req/s | elapsed 10s | ETA 7s");
}

TEST(Progress, LogModePrintsEveryInterval) {
  std::ostringstream out;
  ProgressReporter r(out, /*is_tty=*/false, /*interval_s=*/10, /*enabled=*/true);
  ProgressSnapshot s;
  s.total = 4;
  EXPECT_TRUE(r.update(s, 100.0));  // the first call always draws
  EXPECT_FALSE(r.update(s, 105.0));
  s.done = 1;
  s.elapsed_s = 10;
  EXPECT_TRUE(r.update(s, 110.0));
  r.finish(s);
  std::string text = out.str();
  EXPECT_EQ(text.find('\r'), std::string::npos);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3);
  EXPECT_EQ(text.substr(0, text.find('\n')), format_progress_line(ProgressSnapshot{4, 0, 0, 0, 0, 0}));
}

TEST(Progress, TerminalModeRedrawsInPlace) {
  std::ostringstream out;
  ProgressReporter r(out, /*is_tty=*/true, /*interval_s=*/10, /*enabled=*/true);
  ProgressSnapshot s{1000, 0, 10, 0, 100, 90000};  // long elapsed and ETA
  EXPECT_TRUE(r.update(s, 0.0));
  EXPECT_FALSE(r.update(s, 0.1));
  ProgressSnapshot shorter{1000, 0, 999, 0, 100, 1};
  EXPECT_TRUE(r.update(shorter, 0.3));
  r.finish(shorter);
  std::string first = format_progress_line(s), second = format_progress_line(shorter);
  ASSERT_GT(first.size(), second.size());
  std::string pad(first.size() - second.size(), ' ');
  EXPECT_EQ(out.str(), "\r" + first + "\r" + second + pad + "\r" + second + "\n");
}

TEST(Progress, DisabledOnOtherRanks) {
  std::ostringstream out;
  ProgressReporter r(out, false, 0, /*enabled=*/false);
  EXPECT_FALSE(r.update(ProgressSnapshot{}, 1));
  r.finish(ProgressSnapshot{});
  EXPECT_TRUE(out.str().empty());
}

}  // namespace
}  // namespace conveyor
