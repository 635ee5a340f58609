// step_anatomy (see step_anatomy.h).
#include "stages/step_anatomy.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>

namespace conveyor {
namespace {

using json = nlohmann::json;

constexpr int kSkipPerBatch = 2;  // the first steps of a batch size warm up (autotuning, graph capture)

struct StepView {
  double begin = 0;                    // the first host stamp
  std::map<std::string, double> time;  // seconds per phase
  std::vector<const StepStamp*> spans;
};

std::map<int64_t, StepView> by_step(const StepStamps& stamps) {
  std::map<int64_t, StepView> steps;
  for (const StepStamp& s : stamps.stamps()) {
    StepView& v = steps[s.step];
    if (!s.device && (v.spans.empty() || s.begin_s < v.begin)) v.begin = s.begin_s;
    v.time[s.phase] += s.end_s - s.begin_s;
    v.spans.push_back(&s);
  }
  return steps;
}

// The decode steps of the most common batch size, past its first kSkipPerBatch, that have a next step
// (whose start ends their period): step -> period.
std::map<int64_t, double> steady_decode_steps(const StepStamps& stamps, const std::map<int64_t, StepView>& steps,
                                              int64_t* batch) {
  std::map<int64_t, int> count;
  for (const auto& [step, shape] : stamps.shapes())
    if (shape.decode) ++count[shape.seqs];
  *batch = 0;
  int best = 0;
  for (const auto& [seqs, n] : count)
    if (n > best || (n == best && seqs > *batch)) *batch = seqs, best = n;
  std::map<int64_t, double> periods;
  int seen = 0;
  for (const auto& [step, shape] : stamps.shapes()) {
    if (!shape.decode || shape.seqs != *batch || seen++ < kSkipPerBatch) continue;
    const auto here = steps.find(step), next = steps.find(step + 1);
    if (here == steps.end() || next == steps.end()) continue;
    periods[step] = next->second.begin - here->second.begin;
  }
  return periods;
}

json example_step(int64_t step, double period, const StepView& v) {
  json spans = json::array();
  std::vector<const StepStamp*> sorted = v.spans;
  std::sort(sorted.begin(), sorted.end(), [](const StepStamp* a, const StepStamp* b) { return a->begin_s < b->begin_s; });
  for (const StepStamp* s : sorted)
    spans.push_back({{"phase", s->phase}, {"side", s->device ? "device" : "host"},
                     {"begin_us", 1e6 * (s->begin_s - v.begin)}, {"end_us", 1e6 * (s->end_s - v.begin)}});
  return {{"step", step}, {"period_us", 1e6 * period}, {"spans", spans}};
}

}  // namespace

json step_anatomy(const StepStamps& stamps) {
  const std::map<int64_t, StepView> steps = by_step(stamps);
  int64_t batch = 0;
  const std::map<int64_t, double> periods = steady_decode_steps(stamps, steps, &batch);
  if (periods.empty())
    return {{"steps", 0}, {"why", "no steady decode step: a batch size needs more than " +
                                      std::to_string(kSkipPerBatch + 1) + " decode steps in a row"}};
  std::map<std::string, double> sum;
  double period = 0;
  for (const auto& [step, p] : periods) {
    period += p;
    for (const auto& [phase, t] : steps.at(step).time) sum[phase] += t;
  }
  const double n = static_cast<double>(periods.size());
  auto mean = [&](const std::string& phase) { return sum.count(phase) ? sum.at(phase) / n : 0.0; };
  period /= n;
  const double launch = mean("forward") - mean("metadata");
  const double host = mean("schedule") + mean("apply") + mean("forward") + mean("sample") + mean("wait") + mean("post");
  const bool device = sum.count("gpu forward") > 0;
  const std::vector<std::pair<std::string, double>> host_phases = {
      {"schedule", mean("schedule")}, {"apply", mean("apply")}, {"metadata", mean("metadata")}, {"forward", launch},
      {"sample", mean("sample")},     {"wait", mean("wait")},   {"post", mean("post")},         {"other", period - host}};
  json phases = json::array();
  for (const auto& [phase, t] : host_phases)
    phases.push_back({{"phase", phase}, {"side", "host"}, {"mean_us", 1e6 * t}, {"pct", 100 * t / period}});
  double device_busy = 0;
  for (const char* phase : {"gpu metadata", "gpu forward", "gpu sample"}) {
    if (!sum.count(phase)) continue;
    device_busy += mean(phase);
    phases.push_back({{"phase", phase}, {"side", "device"}, {"mean_us", 1e6 * mean(phase)}, {"pct", 100 * mean(phase) / period}});
  }
  std::vector<std::pair<double, int64_t>> order;
  for (const auto& [step, p] : periods) order.emplace_back(p, step);
  std::sort(order.begin(), order.end());
  const auto& [median_period, median_step] = order[order.size() / 2];
  json out = {{"batch", batch}, {"steps", periods.size()}, {"period_us", 1e6 * period}, {"phases", phases},
              {"example", example_step(median_step, median_period, steps.at(median_step))}};
  if (device) out["device_idle_us"] = 1e6 * (period - device_busy);
  return out;
}

std::string format_step_anatomy(const json& a) {
  if (a.value("steps", 0) == 0) return "step timeline: " + a.value("why", std::string("no steps")) + "\n";
  std::string out;
  char line[200];
  std::snprintf(line, sizeof line, "step timeline: %lld decode steps of batch %lld, %.1f us per step\n",
                a["steps"].get<long long>(), a["batch"].get<long long>(), a["period_us"].get<double>());
  out += line;
  for (const json& p : a["phases"]) {
    std::snprintf(line, sizeof line, "  %-6s %-12s %10.1f us %6.1f%%\n", p["side"].get<std::string>().c_str(),
                  p["phase"].get<std::string>().c_str(), p["mean_us"].get<double>(), p["pct"].get<double>());
    out += line;
  }
  if (a.contains("device_idle_us")) {
    std::snprintf(line, sizeof line, "  device idle          %10.1f us %6.1f%%\n", a["device_idle_us"].get<double>(),
                  100 * a["device_idle_us"].get<double>() / a["period_us"].get<double>());
    out += line;
  }
  return out;
}

}  // namespace conveyor
