// Pipeline timelines: gathering, the usage summary and the Chrome trace (see pipeline_trace.h).
#include "stages/pipeline_trace.h"

#include <sched.h>
#include <sys/resource.h>

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/core/error.h"

namespace conveyor {

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::kRecv: return "recv";
    case Phase::kCompute: return "compute";
    case Phase::kSend: return "send";
    case Phase::kWait: return "wait";
    case Phase::kGpuCompute: return "gpu compute";
    case Phase::kGpuTransfer: return "gpu transfer";
  }
  return "?";
}

bool is_gpu_phase(Phase p) { return p == Phase::kGpuCompute || p == Phase::kGpuTransfer; }

int64_t StageTimeline::involuntary_switches() {
  rusage u{};
  return getrusage(RUSAGE_THREAD, &u) == 0 ? static_cast<int64_t>(u.ru_nivcsw) : -1;
}

void StageTimeline::add(int64_t step, Phase phase, double begin_s, double end_s, int64_t tokens) {
  Span s{step, phase, begin_s, end_s, tokens};
  if (!is_gpu_phase(phase)) {
    s.cpu = sched_getcpu();
    const int64_t n = involuntary_switches();
    if (n >= 0 && switches_ >= 0) s.preempted = n - switches_;
    switches_ = n;
  }
  spans_.push_back(s);
}

namespace {
constexpr int kHeaderWords = 4;  // data, stage, tensor, span count
constexpr int kSpanWords = 7;
constexpr int kGpuTrack = 1 << 20;  // tid offset of a rank's device track

// Seconds of `phase` spans that no `cover` span overlaps.
double exposed_seconds(const std::vector<Span>& spans, Phase phase, Phase cover) {
  std::vector<std::pair<double, double>> covered;
  for (const Span& s : spans)
    if (s.phase == cover) covered.emplace_back(s.begin_s, s.end_s);
  std::sort(covered.begin(), covered.end());
  double exposed = 0;
  for (const Span& s : spans) {
    if (s.phase != phase) continue;
    double t = s.begin_s, hidden = 0;
    for (const auto& [b, e] : covered) {
      if (e <= t) continue;
      if (b >= s.end_s) break;
      hidden += std::min(e, s.end_s) - std::max(b, t);
      t = std::min(e, s.end_s);
    }
    exposed += (s.end_s - s.begin_s) - hidden;
  }
  return exposed;
}

// A rank's compute and send seconds: from its device spans when it has any, else its host spans.
std::pair<double, double> rank_busy_send(const RankTimeline& r) {
  bool gpu = false;
  for (const Span& s : r.spans) gpu = gpu || is_gpu_phase(s.phase);
  const Phase compute = gpu ? Phase::kGpuCompute : Phase::kCompute;
  double compute_s = 0;
  for (const Span& s : r.spans)
    if (s.phase == compute) compute_s += s.end_s - s.begin_s;
  if (gpu) return {compute_s, exposed_seconds(r.spans, Phase::kGpuTransfer, Phase::kGpuCompute)};
  double send_s = 0;
  for (const Span& s : r.spans)
    if (s.phase == Phase::kSend) send_s += s.end_s - s.begin_s;
  return {compute_s, send_s};
}
}  // namespace

std::vector<RankTimeline> gather_timelines(const StageTimeline& mine, int data, int stage, int tensor, MPI_Comm comm) {
  // Spans as doubles: [data, stage, tensor, n, then per span step, phase, begin, end, tokens, cpu, preempted].
  std::vector<double> flat = {double(data), double(stage), double(tensor), double(mine.spans().size())};
  for (const Span& s : mine.spans())
    flat.insert(flat.end(), {double(s.step), double(static_cast<int>(s.phase)), s.begin_s, s.end_s, double(s.tokens),
                             double(s.cpu), double(s.preempted)});
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  int count = static_cast<int>(flat.size());
  std::vector<int> counts(static_cast<size_t>(size)), displs(static_cast<size_t>(size));
  CONVEYOR_MPI_CHECK(MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm));
  int total = 0;
  for (int r = 0; r < size; ++r) {
    displs[static_cast<size_t>(r)] = total;
    total += counts[static_cast<size_t>(r)];
  }
  std::vector<double> all(rank == 0 ? static_cast<size_t>(total) : 0);
  CONVEYOR_MPI_CHECK(MPI_Gatherv(flat.data(), count, MPI_DOUBLE, all.data(), counts.data(), displs.data(), MPI_DOUBLE,
                                 0, comm));
  std::vector<RankTimeline> out;
  if (rank != 0) return out;
  for (int r = 0; r < size; ++r) {
    const double* p = all.data() + displs[static_cast<size_t>(r)];
    RankTimeline t;
    t.rank = r;
    t.data = static_cast<int>(p[0]);
    t.stage = static_cast<int>(p[1]);
    t.tensor = static_cast<int>(p[2]);
    const auto n = static_cast<size_t>(p[3]);
    CONVEYOR_CHECK(kHeaderWords + n * kSpanWords == static_cast<size_t>(counts[static_cast<size_t>(r)]),
                   "timeline of rank ", r, " is malformed");
    for (size_t i = 0; i < n; ++i) {
      const double* s = p + kHeaderWords + i * kSpanWords;
      t.spans.push_back(Span{static_cast<int64_t>(s[0]), static_cast<Phase>(static_cast<int>(s[1])), s[2], s[3],
                             static_cast<int64_t>(s[4]), static_cast<int>(s[5]), static_cast<int64_t>(s[6])});
    }
    out.push_back(std::move(t));
  }
  return out;
}

PipelineUsage summarize_usage(const std::vector<RankTimeline>& ranks) {
  PipelineUsage u;
  double first = 0, last = 0;
  bool any = false;
  for (const RankTimeline& r : ranks)
    for (const Span& s : r.spans) {
      first = any ? std::min(first, s.begin_s) : s.begin_s;
      last = any ? std::max(last, s.end_s) : s.end_s;
      any = true;
    }
  u.window_s = any ? last - first : 0;
  std::map<int, StageUsage> by_stage;
  std::map<int, int> ranks_in_stage;
  for (const RankTimeline& r : ranks) {
    StageUsage& st = by_stage[r.stage];
    st.stage = r.stage;
    ++ranks_in_stage[r.stage];
    const auto [compute_s, send_s] = rank_busy_send(r);
    st.compute_s += compute_s;
    st.send_s += send_s;
  }
  for (auto& [stage, st] : by_stage) {
    const double n = ranks_in_stage[stage];
    st.compute_s /= n;
    st.send_s /= n;
    st.idle_s = std::max(0.0, u.window_s - st.compute_s - st.send_s);
    if (u.window_s > 0) {
      st.busy_pct = 100.0 * st.compute_s / u.window_s;
      st.send_pct = 100.0 * st.send_s / u.window_s;
    }
    st.bubble_pct = std::max(0.0, 100.0 - st.busy_pct - st.send_pct);  // nothing ran: all bubble
    u.busy_pct += st.busy_pct / static_cast<double>(by_stage.size());
    u.bubble_pct += st.bubble_pct / static_cast<double>(by_stage.size());
    u.stages.push_back(st);
  }
  return u;
}

nlohmann::json PipelineUsage::to_json() const {
  nlohmann::json stages_json = nlohmann::json::array();
  for (const StageUsage& s : stages)
    stages_json.push_back({{"stage", s.stage}, {"compute_s", s.compute_s}, {"send_s", s.send_s}, {"idle_s", s.idle_s},
                           {"busy_pct", s.busy_pct}, {"send_pct", s.send_pct}, {"bubble_pct", s.bubble_pct}});
  return {{"window_s", window_s}, {"busy_pct", busy_pct}, {"bubble_pct", bubble_pct}, {"stages", stages_json}};
}

nlohmann::json chrome_trace(const std::vector<RankTimeline>& ranks, const PipelineUsage& usage) {
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", 0}, {"args", {{"name", "conveyor pipeline"}}}});
  for (const RankTimeline& r : ranks) {
    const std::string track = "rank " + std::to_string(r.rank) + " (dp " + std::to_string(r.data) + ", stage " +
                              std::to_string(r.stage) + ", tp " + std::to_string(r.tensor) + ")";
    events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", 0}, {"tid", r.rank}, {"args", {{"name", track}}}});
    events.push_back({{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", 0}, {"tid", r.rank},
                      {"args", {{"sort_index", r.rank}}}});
    bool gpu = false;
    for (const Span& s : r.spans) gpu = gpu || is_gpu_phase(s.phase);
    if (gpu) {
      events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", 0}, {"tid", kGpuTrack + r.rank},
                        {"args", {{"name", "rank " + std::to_string(r.rank) + " gpu" + track.substr(track.find(' ', 5))}}}});
      events.push_back({{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", 0}, {"tid", kGpuTrack + r.rank},
                        {"args", {{"sort_index", r.rank}}}});
    }
    for (const Span& s : r.spans) {
      nlohmann::json args = {{"micro_batch", s.step}, {"tokens", s.tokens}, {"stage", r.stage}};
      if (s.cpu >= 0) args["cpu"] = s.cpu;
      if (s.preempted >= 0) args["preempted"] = s.preempted;
      events.push_back({{"ph", "X"}, {"pid", 0}, {"tid", (is_gpu_phase(s.phase) ? kGpuTrack : 0) + r.rank},
                        {"cat", phase_name(s.phase)},
                        {"name", std::string(phase_name(s.phase)) + " mb " + std::to_string(s.step)},
                        {"ts", s.begin_s * 1e6}, {"dur", (s.end_s - s.begin_s) * 1e6}, {"args", args}});
    }
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}, {"conveyor_usage", usage.to_json()}};
}

}  // namespace conveyor
