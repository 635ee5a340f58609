// Per-CPU run queues of a CPU node (see cpu_run_queues.h). The placement rules are the kernel's
// (select_task_rq_fair's wake-up placement, newidle and periodic balancing); the only number measured
// for them is how long a placement holds (doctor's stayer probe, stages/cpu_placement_probe.h).
#include "stages/sim/cpu_run_queues.h"

#include <algorithm>

namespace conveyor {

std::vector<int> CpuRunQueues::load() const {
  std::vector<int> n(static_cast<size_t>(cpus_), 0);
  for (int c : cpu_)
    if (c >= 0) ++n[static_cast<size_t>(c)];
  return n;
}

// Wake-up placement: a rank that slept in wait_politely wakes from a timer on the CPU it slept on, so
// that CPU is both the waker's and its previous one; it stays there unless that CPU is busy and another
// is idle. The first time, ranks start spread over the CPUs (mpirun starts them one by one).
int CpuRunQueues::place(int rank) const {
  const std::vector<int> n = load();
  int prev = prev_[static_cast<size_t>(rank)];
  if (prev < 0) prev = rank % cpus_;
  if (n[static_cast<size_t>(prev)] == 0) return prev;
  for (int c = 0; c < cpus_; ++c)
    if (n[static_cast<size_t>(c)] == 0) return c;
  return prev;
}

// Balancing: the most crowded CPU gives a rank to the least crowded one while they differ by two or more
// (an idle CPU beside a doubled one, or 3 against 1). The kernel takes a rank that is queued, not the one
// running at that instant; which of them is running is a matter of the slice, so the rank is drawn.
void CpuRunQueues::balance() {
  for (;;) {
    const std::vector<int> n = load();
    const auto hi = std::max_element(n.begin(), n.end()), lo = std::min_element(n.begin(), n.end());
    if (*hi - *lo < 2) return;
    const int from = static_cast<int>(hi - n.begin()), to = static_cast<int>(lo - n.begin());
    std::vector<size_t> on;
    for (size_t r = 0; r < cpu_.size(); ++r)
      if (cpu_[r] == from) on.push_back(r);
    const size_t r = on[std::uniform_int_distribution<size_t>(0, on.size() - 1)(rng_)];
    cpu_[r] = prev_[r] = to;
  }
}

void CpuRunQueues::settle(const std::vector<bool>& busy) {
  cpu_.resize(busy.size(), -1);
  prev_.resize(busy.size(), -1);
  for (size_t r = 0; r < busy.size(); ++r)
    if (!busy[r] && cpu_[r] >= 0) prev_[r] = cpu_[r], cpu_[r] = -1;
  for (size_t r = 0; r < busy.size(); ++r)
    if (busy[r] && cpu_[r] < 0) cpu_[r] = prev_[r] = place(static_cast<int>(r));
  balance();
}

std::vector<double> CpuRunQueues::rates(const CoreSharing& c, double sticky) const {
  const std::vector<int> n = load();
  int k = 0;
  for (int x : n) k += x;
  std::vector<double> rate(cpu_.size(), 0.0);
  for (size_t r = 0; r < cpu_.size(); ++r) {
    if (cpu_[r] < 0) continue;
    if (k <= cpus_) {
      rate[r] = c.at(k);
      continue;
    }
    const double queued = c.at(k) * k / cpus_ / n[static_cast<size_t>(cpu_[r])];
    rate[r] = sticky * queued + (1 - sticky) * c.at(k);
  }
  return rate;
}

}  // namespace conveyor
