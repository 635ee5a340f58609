// What every rank of the pipeline did and when: spans per micro-batch and phase (waiting to receive,
// computing, sending, and on the leader waiting for results), on a clock whose origin all ranks take
// right after a barrier. Rank 0 gathers them into the run summary (per stage: busy, send and bubble
// shares of the run's window) and a Chrome/Perfetto trace (one track per rank). The summary is computed
// from the same spans the trace shows, so the two always agree.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace conveyor {

// kGpu*: device time of a CUDA rank (timing events): its kernels, and its transfers on the
// communication stream. The host phases of the same rank are kept beside them.
enum class Phase { kRecv, kCompute, kSend, kWait, kGpuCompute, kGpuTransfer };
bool is_gpu_phase(Phase p);
const char* phase_name(Phase p);

struct Span {
  int64_t step = 0;    // the micro-batch (plan step)
  Phase phase = Phase::kCompute;
  double begin_s = 0;  // seconds since the common origin
  double end_s = 0;
  int64_t tokens = 0;  // tokens of the micro-batch
  // A host phase's CPU when it ended (sched_getcpu) and the times the scheduler took that CPU from the rank's
  // thread since the span before ended (involuntary context switches: turns lost to ranks sharing its CPU);
  // -1 on device phases and where the host does not say.
  int cpu = -1;
  int64_t preempted = -1;
};

class StageTimeline {
 public:
  StageTimeline() : origin_(std::chrono::steady_clock::now()), switches_(involuntary_switches()) {}
  double now() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - origin_).count(); }
  void add(int64_t step, Phase phase, double begin_s, double end_s, int64_t tokens);
  const std::vector<Span>& spans() const { return spans_; }
  std::chrono::steady_clock::time_point origin() const { return origin_; }
  // Restarts the clock (call right after a barrier) and forgets the spans.
  void restart() {
    origin_ = std::chrono::steady_clock::now();
    spans_.clear();
    switches_ = involuntary_switches();
  }

 private:
  std::chrono::steady_clock::time_point origin_;
  std::vector<Span> spans_;
  // The calling thread's involuntary context switches so far (getrusage), -1 where the host does not say.
  static int64_t involuntary_switches();
  int64_t switches_;  // the thread's involuntary context switches when the last host span ended (or restart)
};

struct RankTimeline {
  int rank = 0, data = 0, stage = 0, tensor = 0;
  std::vector<Span> spans;
};

// Collective over `comm` (every rank calls it): rank 0 of comm gets every rank's timeline, ordered by
// rank; the others get an empty vector. coords = {data, stage, tensor} of the caller.
std::vector<RankTimeline> gather_timelines(const StageTimeline& mine, int data, int stage, int tensor, MPI_Comm comm);

struct StageUsage {
  int stage = 0;
  double compute_s = 0, send_s = 0, idle_s = 0;  // per rank of the stage, averaged over its ranks
  double busy_pct = 0, send_pct = 0, bubble_pct = 0;  // of the window; they sum to 100
};

struct PipelineUsage {
  double window_s = 0;  // first span begin to last span end, over all ranks
  std::vector<StageUsage> stages;
  double busy_pct = 0, bubble_pct = 0;  // averaged over stages
  nlohmann::json to_json() const;
};

// busy = computing; send = posting and completing sends; bubble = the rest of the window (waiting to
// receive, waiting for results, idle): a stage that has nothing to do while others work. A rank with
// device spans is measured on the device: busy = its kernels, send = the part of its transfers that
// no kernel overlaps (a transfer hidden behind compute costs the stage nothing).
PipelineUsage summarize_usage(const std::vector<RankTimeline>& ranks);

// Chrome trace event format (loads in chrome://tracing and ui.perfetto.dev): one process, one thread
// (track) per rank named "rank R (stage S, tp T)", and one "rank R gpu (...)" for its device spans,
// complete ("X") events in microseconds, plus the usage under "conveyor_usage".
nlohmann::json chrome_trace(const std::vector<RankTimeline>& ranks, const PipelineUsage& usage);

}  // namespace conveyor
