// Doctor's quantum probe (see cpu_quantum_probe.h).
#include "stages/cpu_quantum_probe.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <thread>

#include "runtime/core/error.h"
#include "runtime/core/percentile.h"
#include "stages/cpu_probe_mpi.h"

namespace conveyor {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kWindow = std::chrono::milliseconds(300);  // each of the two measurements
constexpr int64_t kGapNs = 50000;  // a stamp this late after the one before: the thread did not run between
constexpr auto kBurst = std::chrono::milliseconds(2);  // the woken thread's task, alone
constexpr auto kNap = std::chrono::milliseconds(5);   // and its wait before each

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

// ~2 us of arithmetic that the compiler cannot drop.
void step() {
  static thread_local volatile double sink = 1.0;
  double x = sink;
  for (int i = 0; i < 2000; ++i) x = x * 1.0000001 + 1e-9;
  sink = x;
}

// false where the host does not let a thread be pinned (the probe then measures nothing).
bool pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

// Steps until `end`, stamping the clock after each.
std::vector<int64_t> spin(Clock::time_point end) {
  std::vector<int64_t> stamps;
  stamps.reserve(200000);
  while (Clock::now() < end) {
    step();
    stamps.push_back(now_ns());
  }
  return stamps;
}

// Two threads pinned to `cpu`, each stepping until the window ends: their runs between gaps.
std::vector<double> turns_on(int cpu) {
  const Clock::time_point end = Clock::now() + std::chrono::milliseconds(20) + kWindow;
  std::vector<int64_t> a, b;
  std::thread other([&] {
    if (pin_to(cpu)) b = spin(end);
  });
  if (pin_to(cpu)) a = spin(end);
  other.join();
  if (a.empty() || b.empty()) return {};  // not pinned: two threads on two CPUs would show no turns
  std::vector<double> runs = interior_runs(a, kGapNs), more = interior_runs(b, kGapNs);
  runs.insert(runs.end(), more.begin(), more.end());
  return runs;
}

// The steps a kBurst takes alone on `cpu` (the best of 5 tries), then, beside a thread that never pauses,
// each burst's wall time over its time alone.
std::vector<double> woken_stretches(int cpu) {
  if (!pin_to(cpu)) return {};
  int64_t steps = 0;
  const Clock::time_point until = Clock::now() + kBurst;
  while (Clock::now() < until) step(), ++steps;
  double alone = 1e30;
  for (int i = 0; i < 5; ++i) {
    const Clock::time_point t0 = Clock::now();
    for (int64_t s = 0; s < steps; ++s) step();
    alone = std::min(alone, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  const Clock::time_point end = Clock::now() + std::chrono::milliseconds(20) + kWindow;
  std::thread spinner([&] {
    if (pin_to(cpu)) spin(end);
  });
  std::vector<double> out;
  nap_until(Clock::now() + std::chrono::milliseconds(20));
  while (Clock::now() + kNap + 4 * kBurst < end) {
    nap_until(Clock::now() + kNap);
    const Clock::time_point t0 = Clock::now();
    for (int64_t s = 0; s < steps; ++s) step();
    out.push_back(std::chrono::duration<double>(Clock::now() - t0).count() / alone);
  }
  spinner.join();
  return out;
}

double mean(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

}  // namespace

std::vector<double> interior_runs(const std::vector<int64_t>& stamps_ns, int64_t gap_ns) {
  std::vector<double> runs;
  bool first = true;
  size_t begin = 0;
  for (size_t i = 1; i < stamps_ns.size(); ++i) {
    if (stamps_ns[i] - stamps_ns[i - 1] <= gap_ns) continue;
    if (!first) runs.push_back(static_cast<double>(stamps_ns[i - 1] - stamps_ns[begin]) * 1e-9);
    first = false;
    begin = i;
  }
  return runs;  // the run from `begin` to the end is cut by the window
}

nlohmann::json measure_cpu_quantum(MPI_Comm node) {
  int rank = 0;
  MPI_Comm_rank(node, &rank);
  double out[5] = {0, 0, 0, 0, 0};
  polite_barrier(node);
  cpu_set_t before;
  if (rank == 0 && pthread_getaffinity_np(pthread_self(), sizeof before, &before) == 0) {
    const int cpu = sched_getcpu();
    const std::vector<double> turns = turns_on(cpu);
    const std::vector<double> stretch = turns.empty() ? std::vector<double>{} : woken_stretches(cpu);
    pthread_setaffinity_np(pthread_self(), sizeof before, &before);  // back to the CPUs it had
    // A turn cut short (another thread's wake-up on that CPU, a timer) pulls the mean down; the median is the
    // slice (4.0 ms in nearly every turn on this machine, means 2.9-3.9 ms).
    out[0] = percentile(turns, 0.5) * 1e6, out[1] = static_cast<double>(turns.size());
    out[2] = mean(stretch), out[3] = static_cast<double>(stretch.size());
    out[4] = static_cast<double>(std::count_if(stretch.begin(), stretch.end(), [](double x) { return x < 1.5; })) /
             std::max<double>(1, out[3]);
  }
  polite_barrier(node);
  CONVEYOR_MPI_CHECK(MPI_Bcast(out, 5, MPI_DOUBLE, 0, node));
  return {{"quantum_us", out[0]}, {"turns", static_cast<int>(out[1])}, {"woken_stretch", out[2]},
          {"bursts", static_cast<int>(out[3])}, {"woken_first", out[4]},
          {"method", "two threads of rank 0 pinned to its CPU compute in ~2 us steps for 0.3 s, stamping the clock "
                     "after each; a gap over 50 us ends a turn, and quantum_us is the median of the whole turns. Then "
                     "one of them computes without a pause while the other naps 5 ms (as wait_politely) and computes "
                     "2 ms (its time alone) at a time: woken_stretch is the bursts' mean wall time over their time "
                     "alone, woken_first the share of bursts under 1.5 times it (the woken thread ran first)"}};
}

}  // namespace conveyor
