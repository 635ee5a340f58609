// Doctor's stayer probe (see cpu_placement_probe.h). The phases are wall time, not work: the probe asks
// where the scheduler puts ranks, not how fast they go, and fixed phases keep the overlap of the sleepers'
// compute the same on fast and slow hosts (each computes 12 of every 17 ms, as a stage of a pipeline
// with 25-35% bubble does, staggered so that all of them compute together part of the time).
#include "stages/cpu_placement_probe.h"

#include <sched.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <random>
#include <thread>

#include "kernels/cpu/matmul.h"
#include "runtime/core/error.h"
#include "stages/cpu_probe_mpi.h"

namespace conveyor {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kWindow = std::chrono::milliseconds(600);
constexpr auto kCompute = std::chrono::milliseconds(12);  // a later stage's decode step on a small model
constexpr auto kSleep = std::chrono::milliseconds(5);     // its wait for the next micro-batch
constexpr int64_t kGridNs = 100000;                       // the traces are read every 0.1 ms
constexpr int64_t kSettleNs = 50000000;                   // the first 50 ms are not counted (start-up)

int64_t ns_of(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// A decode-sized matmul (16 rows, 4 MiB of weights), its CPU noted after each call.
struct Work {
  std::vector<float> w, x = std::vector<float>(size_t(16) * 1024, 0.5f), y = std::vector<float>(size_t(16) * 1024);
  Work() : w(size_t(1024) * 1024) {
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    for (float& v : w) v = u(rng);
  }
  void until(Clock::time_point end, PlacementTrace* t) {
    const int64_t begin = ns_of(Clock::now());
    while (Clock::now() < end) {
      matmul_ref(y.data(), x.data(), w.data(), nullptr, 16, 1024, 1024);
      t->cpu_at.emplace_back(ns_of(Clock::now()), sched_getcpu());
    }
    t->phases.emplace_back(begin, ns_of(Clock::now()));
  }
};

// Rank 0 computes from start to end without a pause; ranks 1 .. ranks-1 compute kCompute and sleep kSleep
// in turn, rank r starting (r - 1) / (ranks - 1) of a cycle late.
PlacementTrace run_rank(int rank, int ranks, Clock::time_point start, Clock::time_point end, Work& work) {
  PlacementTrace t;
  if (rank >= ranks) return t;
  std::this_thread::sleep_until(start);
  if (rank == 0) {
    work.until(end, &t);
    return t;
  }
  const auto cycle = kCompute + kSleep;
  nap_until(start + cycle * (rank - 1) / (ranks - 1));
  while (Clock::now() < end) {
    const Clock::time_point phase_end = std::min(Clock::now() + kCompute, end);
    work.until(phase_end, &t);
    nap_until(phase_end + kSleep);
  }
  return t;
}

// Every rank's trace on rank 0 of `node` (the others get none).
std::vector<PlacementTrace> gather(MPI_Comm node, const PlacementTrace& mine) {
  std::vector<int64_t> flat = {static_cast<int64_t>(mine.phases.size())};
  for (const auto& [a, b] : mine.phases) flat.push_back(a), flat.push_back(b);
  for (const auto& [t, c] : mine.cpu_at) flat.push_back(t), flat.push_back(c);
  std::vector<PlacementTrace> out;
  for (const std::vector<int64_t>& v : gather_to_root(node, flat)) {
    const int64_t* p = v.data();
    const int64_t* stop = p + v.size();
    PlacementTrace t;
    const int64_t phases = *p++;
    for (int64_t i = 0; i < phases; ++i, p += 2) t.phases.emplace_back(p[0], p[1]);
    for (; p < stop; p += 2) t.cpu_at.emplace_back(p[0], static_cast<int>(p[1]));
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

// A phase counts for stickiness when at least this many grid points of it were crowded (2 ms at 0.1 ms).
constexpr int64_t kMinCrowdedPoints = 20;

StayerStats stayer_stats(const std::vector<PlacementTrace>& traces, int cpus, int64_t from, int64_t to, int64_t step_ns) {
  StayerStats s;
  const size_t n = traces.size();
  std::vector<size_t> phase(n, 0), sample(n, 0);
  std::vector<int> prev_cpu;
  // Per sleeper and phase: grid points computing, crowded, and doubled up while crowded.
  std::vector<std::vector<std::array<int64_t, 3>>> points(n);
  for (size_t r = 0; r < n; ++r) points[r].assign(traces[r].phases.size(), {0, 0, 0});
  for (int64_t t = from; t < to; t += step_ns) {
    std::vector<int> cpu(n, -1);  // -1: not computing, or no CPU noted yet in this phase
    for (size_t r = 0; r < n; ++r) {
      const PlacementTrace& tr = traces[r];
      while (phase[r] < tr.phases.size() && tr.phases[phase[r]].second <= t) ++phase[r];
      while (sample[r] + 1 < tr.cpu_at.size() && tr.cpu_at[sample[r] + 1].first <= t) ++sample[r];
      if (phase[r] >= tr.phases.size() || tr.phases[phase[r]].first > t || sample[r] >= tr.cpu_at.size()) continue;
      const auto& [at, c] = tr.cpu_at[sample[r]];
      if (at <= t && at >= tr.phases[phase[r]].first) cpu[r] = c;
    }
    const int k = static_cast<int>(std::count_if(cpu.begin(), cpu.end(), [](int c) { return c >= 0; }));
    for (size_t r = 1; r < n; ++r) {
      if (cpu[r] < 0) continue;
      std::array<int64_t, 3>& p = points[r][phase[r]];
      ++p[0];
      if (k > cpus) ++p[1], p[2] += std::count(cpu.begin(), cpu.end(), cpu[r]) > 1;
    }
    if (k <= cpus || cpu[0] < 0) {
      prev_cpu.clear();
      continue;
    }
    s.crowded_s += step_ns * 1e-9;
    if (std::count(cpu.begin(), cpu.end(), cpu[0]) > 1) s.doubled_s += step_ns * 1e-9;
    // Who shares with whom: the same ranks computing on other CPUs, or paired otherwise, is a move.
    if (!prev_cpu.empty()) {
      bool same = true;
      for (size_t a = 0; a < n && same; ++a)
        for (size_t b = a + 1; b < n && same; ++b)
          if ((cpu[a] >= 0) != (prev_cpu[a] >= 0) || (cpu[b] >= 0) != (prev_cpu[b] >= 0)) same = false;
      bool moved = false;
      for (size_t a = 0; a < n && same; ++a)
        for (size_t b = a + 1; b < n; ++b)
          if (cpu[a] >= 0 && cpu[b] >= 0 && (cpu[a] == cpu[b]) != (prev_cpu[a] == prev_cpu[b])) moved = true;
      if (same && moved) ++s.moves;
    }
    prev_cpu = cpu;
  }
  std::vector<double> f;
  for (const auto& rank : points)
    for (const auto& p : rank)
      if (p[1] >= kMinCrowdedPoints) f.push_back(static_cast<double>(p[2]) / static_cast<double>(p[1]));
  s.phases = static_cast<int>(f.size());
  if (f.size() >= 2) {
    double mean = 0, var = 0;
    for (double x : f) mean += x / static_cast<double>(f.size());
    for (double x : f) var += (x - mean) * (x - mean) / static_cast<double>(f.size());
    const double bernoulli = mean * (1 - mean);
    s.stickiness = bernoulli > 1e-9 ? std::min(1.0, var / bernoulli) : 1.0;  // never or always doubled: nothing mixes
  }
  return s;
}

nlohmann::json measure_stayer_placement(MPI_Comm node) {
  int rank = 0, size = 1;
  MPI_Comm_rank(node, &rank);
  MPI_Comm_size(node, &size);
  const int cpus = static_cast<int>(std::thread::hardware_concurrency());
  if (size <= cpus) return nullptr;
  Work work;
  nlohmann::json by_ranks = nlohmann::json::array();
  double last = 0;
  for (int ranks = cpus + 1; ranks <= size; ++ranks) {
    polite_barrier(node);
    int64_t start_ns = ns_of(Clock::now() + std::chrono::milliseconds(20));
    CONVEYOR_MPI_CHECK(MPI_Bcast(&start_ns, 1, MPI_INT64_T, 0, node));
    const Clock::time_point start{std::chrono::nanoseconds(start_ns)}, end = start + kWindow;
    const PlacementTrace mine = run_rank(rank, ranks, start, end, work);
    polite_barrier(node);  // ranks left out of this round must not busy-poll in the gather while others run
    const std::vector<PlacementTrace> all = gather(node, mine);
    double out[5] = {0, 0, 0, 0, 0};
    if (rank == 0) {
      const StayerStats s = stayer_stats(all, cpus, start_ns + kSettleNs, ns_of(end), kGridNs);
      out[0] = s.share(), out[1] = s.crowded_s, out[2] = static_cast<double>(s.moves), out[3] = s.stickiness;
      out[4] = s.phases;
    }
    CONVEYOR_MPI_CHECK(MPI_Bcast(out, 5, MPI_DOUBLE, 0, node));
    by_ranks.push_back({{"ranks", ranks}, {"stayer_share", out[0]}, {"crowded_ms", out[1] * 1e3},
                        {"moves_per_s", out[1] > 0 ? out[2] / out[1] : 0.0}, {"stickiness", out[3]},
                        {"phases", static_cast<int>(out[4])}});
    last = out[0];
  }
  return {{"stayer_share", last}, {"by_ranks", by_ranks},
          {"method", "rank 0 computes without a pause (matmul_ref m = 16, n = k = 1024) for 0.6 s; ranks 1 .. r-1 compute "
                     "12 ms and sleep 5 ms in naps of 2-100 us (as wait_politely), staggered; each notes sched_getcpu() "
                     "after every call. Read every 0.1 ms after the first 50 ms: of the time more ranks compute than "
                     "CPUs, the share in which rank 0 shares its CPU (stayer_share), and how often the pairing "
                     "changes while the same ranks compute (moves_per_s); stayer_share is the one with all the node's ranks"}};
}

}  // namespace conveyor
