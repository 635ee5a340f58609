// What the leader's rank does in each engine step, on one clock, for `conveyor bench --step-timeline`:
// host spans (the engine's scheduling and bookkeeping, the stage's plan application, kernel launches and
// sampling) and device spans (the stage's kernels and its sampling on the GPU, from timing events read
// after the run), plus each step's shape. Seconds since restart(), which the stage calls together with
// its trace clock, so device marks (which count from the same restart) line up with host spans.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace conveyor {

struct StepStamp {
  int64_t step = 0;
  std::string phase;  // "schedule", "apply", "forward", "sample", "wait", "post"; device: "gpu forward", ...
  double begin_s = 0, end_s = 0;
  bool device = false;
};

// A step's shape: the sequences and tokens it computed, and whether every chunk was a decode (one token).
struct StepShape {
  int64_t seqs = 0, tokens = 0;
  bool decode = false;
};

class StepStamps {
 public:
  StepStamps() : origin_(std::chrono::steady_clock::now()) {}
  double now() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - origin_).count(); }
  // Forgets every stamp; times count from `origin` (the stage's trace clock) from now on.
  void restart(std::chrono::steady_clock::time_point origin = std::chrono::steady_clock::now()) {
    origin_ = origin;
    stamps_.clear();
    shapes_.clear();
  }
  void add(int64_t step, std::string phase, double begin_s, double end_s, bool device = false) {
    stamps_.push_back(StepStamp{step, std::move(phase), begin_s, end_s, device});
  }
  void shape(int64_t step, const StepShape& s) { shapes_[step] = s; }
  const std::vector<StepStamp>& stamps() const { return stamps_; }
  const std::map<int64_t, StepShape>& shapes() const { return shapes_; }

  // Stamps [construction, destruction) as one host span of `phase` (nothing when stamps is null).
  class Span {
   public:
    Span(StepStamps* stamps, int64_t step, const char* phase)
        : stamps_(stamps), step_(step), phase_(phase), begin_(stamps ? stamps->now() : 0) {}
    ~Span() {
      if (stamps_) stamps_->add(step_, phase_, begin_, stamps_->now());
    }
    void set_step(int64_t step) { step_ = step; }
    Span(const Span&) = delete;
    Span& operator=(const Span&) = delete;

   private:
    StepStamps* stamps_;
    int64_t step_;
    const char* phase_;
    double begin_;
  };

 private:
  std::chrono::steady_clock::time_point origin_;
  std::vector<StepStamp> stamps_;
  std::map<int64_t, StepShape> shapes_;
};

}  // namespace conveyor
