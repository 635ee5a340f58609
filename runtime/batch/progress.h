// The rank-0 progress line of a batch job: done/total requests, output tokens/s (counted as tokens are
// made) and ETA (the tokens left at the mean length of the finished requests, less those already made
// for unfinished ones, at the token rate; requests per second until a finished request gives a length). On a terminal
// it is redrawn in place with \r; otherwise (Slurm logs) a plain line is written every interval seconds.
// Rates count only this run's work, so a resumed job shows an honest ETA. Time is passed in by the
// caller (seconds on any monotonic clock), which keeps the reporter deterministic under test.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace conveyor {

struct ProgressSnapshot {
  int64_t total = 0;          // requests in the job (valid lines)
  int64_t resumed = 0;        // done by earlier runs, skipped now
  int64_t done = 0;           // finished in this run (results and failed requests)
  int64_t failed = 0;         // of `done`, those that went to the error file
  int64_t output_tokens = 0;  // generated in this run so far, unfinished requests included
  double elapsed_s = 0;       // since this run started generating
  int64_t finished_output_tokens = 0;  // of output_tokens, those of finished requests (0: unknown)
};

// "1m05s", "2h03m", "42s"; "--" for negative or non-finite values.
std::string format_duration(double seconds);
// "progress 130/1000 (13.0%) | 3 failed | 812.4 out tok/s | 2.10 req/s | elapsed 1m02s | ETA 6m54s"
std::string format_progress_line(const ProgressSnapshot& s);

class ProgressReporter {
 public:
  // `enabled` false (ranks other than 0) makes every call a no-op. On a tty the line is redrawn at most
  // every kTtyRedrawSeconds.
  ProgressReporter(std::ostream& out, bool is_tty, double interval_s, bool enabled);
  static constexpr double kTtyRedrawSeconds = 0.25;

  // Draws when due; returns whether it drew.
  bool update(const ProgressSnapshot& s, double now_s);
  // The final line (always drawn), ended with a newline on a tty.
  void finish(const ProgressSnapshot& s);

 private:
  std::ostream& out_;
  bool is_tty_;
  double interval_s_;
  bool enabled_;
  bool drawn_ = false;
  double last_draw_s_ = 0;
  size_t last_width_ = 0;  // to blank the rest of a longer previous line on redraw
};

}  // namespace conveyor
