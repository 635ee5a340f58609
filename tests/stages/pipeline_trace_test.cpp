// The usage summary from device spans: a GPU rank is busy for its kernels and sends only for the
// transfer time no kernel overlaps; host-only ranks keep the host rule; the trace puts device spans
// on their own track per rank. Host spans carry their CPU and the turns their thread lost.
#include "stages/pipeline_trace.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>
#include <vector>

namespace conveyor {
namespace {

RankTimeline rank_with(int rank, int stage, std::vector<Span> spans) {
  RankTimeline r;
  r.rank = rank;
  r.stage = stage;
  r.spans = std::move(spans);
  return r;
}

TEST(PipelineTrace, GpuRanksCountKernelsAndOnlyTheExposedTransfer) {
  // Stage 0 on a GPU: kernels [0, 4) and [5, 9); transfers [3, 6) (1 s hidden at [3, 4), 1 s at [5, 6),
  // 1 s exposed) and [9, 10) (exposed). Host spans of the same rank are ignored for usage.
  RankTimeline gpu = rank_with(0, 0, {{0, Phase::kGpuCompute, 0, 4, 8}, {1, Phase::kGpuCompute, 5, 9, 8},
                                      {0, Phase::kGpuTransfer, 3, 6, 8}, {1, Phase::kGpuTransfer, 9, 10, 8},
                                      {0, Phase::kCompute, 0, 0.5, 8}, {0, Phase::kSend, 0.5, 9.5, 8}});
  // Stage 1 on the host: compute 2 s, send 1 s.
  RankTimeline host = rank_with(1, 1, {{0, Phase::kCompute, 1, 3, 8}, {0, Phase::kSend, 3, 4, 8}});
  const PipelineUsage u = summarize_usage({gpu, host});
  ASSERT_EQ(u.stages.size(), 2u);
  EXPECT_DOUBLE_EQ(u.window_s, 10.0);
  EXPECT_DOUBLE_EQ(u.stages[0].compute_s, 8.0);
  EXPECT_DOUBLE_EQ(u.stages[0].send_s, 2.0);
  EXPECT_DOUBLE_EQ(u.stages[0].bubble_pct, 0.0);
  EXPECT_DOUBLE_EQ(u.stages[1].compute_s, 2.0);
  EXPECT_DOUBLE_EQ(u.stages[1].send_s, 1.0);
  EXPECT_DOUBLE_EQ(u.stages[1].bubble_pct, 70.0);

  const nlohmann::json trace = chrome_trace({gpu, host}, u);
  std::set<int> gpu_tracks, host_tracks;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const std::string cat = e["cat"];
    (cat.rfind("gpu", 0) == 0 ? gpu_tracks : host_tracks).insert(e["tid"].get<int>());
  }
  EXPECT_EQ(host_tracks, (std::set<int>{0, 1}));
  ASSERT_EQ(gpu_tracks.size(), 1u);
  EXPECT_EQ(host_tracks.count(*gpu_tracks.begin()), 0u);
}

bool pin(pthread_t t, int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(t, sizeof(set), &set) == 0;
}

// A host span notes the CPU it ended on and the turns its thread lost meanwhile: with a thread that never pauses
// pinned to the same CPU, 40 ms of computing lose several turns to it (a slice is a few ms). A device span says
// neither, and the trace shows both only where known.
TEST(PipelineTrace, HostSpansSayTheirCpuAndTheTurnsLostToACoRunner) {
  cpu_set_t before;
  ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof(before), &before), 0);
  const int cpu = sched_getcpu();
  ASSERT_GE(cpu, 0);
  const bool pinned = pin(pthread_self(), cpu);
  std::atomic<bool> stop{false};
  std::thread hog([&] {
    while (!stop.load(std::memory_order_relaxed)) {
    }
  });
  const bool hog_pinned = pin(hog.native_handle(), cpu);
  StageTimeline tl;
  const double t0 = tl.now();
  volatile double sink = 0;
  while (tl.now() - t0 < 0.04) sink = sink + 1.0;
  tl.add(0, Phase::kCompute, t0, tl.now(), 4);
  stop = true;
  hog.join();
  pthread_setaffinity_np(pthread_self(), sizeof(before), &before);
  tl.add(0, Phase::kGpuCompute, t0, tl.now(), 4);

  const Span& host = tl.spans()[0];
  EXPECT_GE(host.cpu, 0);
  ASSERT_GE(host.preempted, 0);
  if (pinned && hog_pinned) {
    EXPECT_EQ(host.cpu, cpu);
    EXPECT_GE(host.preempted, 2) << "40 ms beside a pinned co-runner should lose turns";
  }
  EXPECT_EQ(tl.spans()[1].cpu, -1);
  EXPECT_EQ(tl.spans()[1].preempted, -1);

  const RankTimeline r = rank_with(0, 0, tl.spans());
  const nlohmann::json trace = chrome_trace({r}, summarize_usage({r}));
  int with_cpu = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const bool gpu = std::string(e["cat"]).rfind("gpu", 0) == 0;
    EXPECT_EQ(e["args"].contains("cpu"), !gpu);
    EXPECT_EQ(e["args"].contains("preempted"), !gpu);
    if (!gpu) with_cpu += e["args"]["cpu"].get<int>() == host.cpu;
  }
  EXPECT_EQ(with_cpu, 1);
}

}  // namespace
}  // namespace conveyor
