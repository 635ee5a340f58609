// Progress line formatting and pacing (see progress.h).
#include "runtime/batch/progress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace conveyor {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--";
  auto s = static_cast<int64_t>(std::llround(seconds));
  char buf[32];
  if (s < 60) {
    std::snprintf(buf, sizeof(buf), "%llds", static_cast<long long>(s));
  } else if (s < 3600) {
    std::snprintf(buf, sizeof(buf), "%lldm%02llds", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
  } else {
    std::snprintf(buf, sizeof(buf), "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>((s % 3600) / 60));
  }
  return buf;
}

namespace {

// Requests finish late when they run together, so a rate of finished requests starts at zero and an
// ETA from it only shrinks once the first batch ends; tokens are made steadily from the first step.
double eta_seconds(const ProgressSnapshot& s, int64_t left, double tok_s, double req_s) {
  const int64_t answered = s.done - s.failed;
  if (s.finished_output_tokens > 0 && answered > 0 && tok_s > 0) {
    const double per_request = static_cast<double>(s.finished_output_tokens) / static_cast<double>(answered);
    const double in_flight = static_cast<double>(s.output_tokens - s.finished_output_tokens);
    return std::max(0.0, static_cast<double>(left) * per_request - in_flight) / tok_s;
  }
  // No ETA until this run has finished something: a rate of zero predicts nothing.
  return req_s > 0 ? static_cast<double>(left) / req_s : -1.0;
}

}  // namespace

std::string format_progress_line(const ProgressSnapshot& s) {
  int64_t finished = s.resumed + s.done;
  double pct = s.total > 0 ? 100.0 * static_cast<double>(finished) / static_cast<double>(s.total) : 100.0;
  bool timed = s.elapsed_s > 0;
  double tok_s = timed ? static_cast<double>(s.output_tokens) / s.elapsed_s : 0.0;
  double req_s = timed ? static_cast<double>(s.done) / s.elapsed_s : 0.0;
  const int64_t left = s.total - finished;
  const double eta = left <= 0 ? 0.0 : eta_seconds(s, left, tok_s, req_s);
  char buf[256];
  std::snprintf(buf, sizeof(buf), "progress %lld/%lld (%.1f%%)", static_cast<long long>(finished),
                static_cast<long long>(s.total), pct);
  std::string line = buf;
  if (s.resumed > 0) line += " | " + std::to_string(s.resumed) + " resumed";
  if (s.failed > 0) line += " | " + std::to_string(s.failed) + " failed";
  std::snprintf(buf, sizeof(buf), " | %.1f out tok/s | %.2f req/s | elapsed %s | ETA %s", tok_s, req_s,
                format_duration(s.elapsed_s).c_str(), format_duration(eta).c_str());
  return line + buf;
}

ProgressReporter::ProgressReporter(std::ostream& out, bool is_tty, double interval_s, bool enabled)
    : out_(out), is_tty_(is_tty), interval_s_(interval_s), enabled_(enabled) {}

bool ProgressReporter::update(const ProgressSnapshot& s, double now_s) {
  if (!enabled_) return false;
  double every = is_tty_ ? kTtyRedrawSeconds : interval_s_;
  if (drawn_ && now_s - last_draw_s_ < every) return false;
  std::string line = format_progress_line(s);
  if (is_tty_) {
    // Pad with spaces rather than an escape code: the width shrinks when e.g. the ETA gets shorter.
    std::string pad(last_width_ > line.size() ? last_width_ - line.size() : 0, ' ');
    out_ << '\r' << line << pad << std::flush;
    last_width_ = line.size();
  } else {
    out_ << line << '\n' << std::flush;
  }
  drawn_ = true;
  last_draw_s_ = now_s;
  return true;
}

void ProgressReporter::finish(const ProgressSnapshot& s) {
  if (!enabled_) return;
  std::string line = format_progress_line(s);
  if (is_tty_) {
    std::string pad(last_width_ > line.size() ? last_width_ - line.size() : 0, ' ');
    out_ << '\r' << line << pad << '\n' << std::flush;
  } else {
    out_ << line << '\n' << std::flush;
  }
}

}  // namespace conveyor
