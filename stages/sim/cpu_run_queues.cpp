// Per-CPU run queues of a CPU node (see cpu_run_queues.h). The rules are the kernel's (select_task_rq_fair's
// wake-up placement, newidle and periodic balancing, the turns of a shared CPU); the numbers measured for them
// are the slice (doctor's quantum probe) and, without it, how long a placement holds (doctor's stayer probe,
// stages/cpu_placement_probe.h).
#include "stages/sim/cpu_run_queues.h"

#include <algorithm>
#include <limits>

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
// running at that instant: with turns simulated, one whose turn it is not; without, which of them runs is a
// matter of the slice, so the rank is drawn.
void CpuRunQueues::balance() {
  for (;;) {
    const std::vector<int> n = load();
    const auto hi = std::max_element(n.begin(), n.end()), lo = std::min_element(n.begin(), n.end());
    if (*hi - *lo < 2) return;
    const int from = static_cast<int>(hi - n.begin()), to = static_cast<int>(lo - n.begin());
    std::vector<size_t> on;
    for (size_t r = 0; r < cpu_.size(); ++r)
      if (cpu_[r] == from && (quantum_ <= 0 || turn_[static_cast<size_t>(from)] != static_cast<int>(r)))
        on.push_back(r);
    const size_t r = on[std::uniform_int_distribution<size_t>(0, on.size() - 1)(rng_)];
    cpu_[r] = prev_[r] = to;
    key_[r] = back_++;
  }
}

// A rank that starts computing on a taken CPU goes to the front of its queue: it slept, so the kernel owes it
// CPU time and preempts the rank that runs (EEVDF's wake-up preemption; doctor's quantum probe on this 2-CPU
// machine: 78-98% of 2 ms tasks woken beside a rank that never pauses ran first, at full speed).
void CpuRunQueues::settle(const std::vector<bool>& busy, double t) {
  cpu_.resize(busy.size(), -1);
  prev_.resize(busy.size(), -1);
  key_.resize(busy.size(), 0);
  for (size_t r = 0; r < busy.size(); ++r)
    if (!busy[r] && cpu_[r] >= 0) prev_[r] = cpu_[r], cpu_[r] = -1;
  for (size_t r = 0; r < busy.size(); ++r)
    if (busy[r] && cpu_[r] < 0) cpu_[r] = prev_[r] = place(static_cast<int>(r)), key_[r] = --front_;
  note_turns(t);  // whose turn it is now (a balance takes a rank whose turn it is not)
  balance();
  note_turns(t);
}

void CpuRunQueues::note_turns(double t) {
  turn_.resize(static_cast<size_t>(cpus_), -1);
  turn_start_.resize(static_cast<size_t>(cpus_), t);
  std::vector<int> first(static_cast<size_t>(cpus_), -1);
  for (size_t r = 0; r < cpu_.size(); ++r) {
    if (cpu_[r] < 0) continue;
    int& f = first[static_cast<size_t>(cpu_[r])];
    if (f < 0 || key_[r] < key_[static_cast<size_t>(f)]) f = static_cast<int>(r);
  }
  for (size_t c = 0; c < first.size(); ++c)
    if (first[c] != turn_[c]) turn_[c] = first[c], turn_start_[c] = t;
}

bool CpuRunQueues::runs(int rank) const {
  const int c = cpu_of(rank);
  return c >= 0 && (quantum_ <= 0 || turn_[static_cast<size_t>(c)] == rank);
}

double CpuRunQueues::next_turn_end() const {
  double next = std::numeric_limits<double>::infinity();
  if (quantum_ <= 0) return next;
  const std::vector<int> n = load();
  for (size_t c = 0; c < turn_.size(); ++c)
    if (n[c] >= 2) next = std::min(next, turn_start_[c] + quantum_);
  return next;
}

void CpuRunQueues::end_turns(double t) {
  const std::vector<int> n = load();
  for (size_t c = 0; c < turn_.size(); ++c)
    if (n[c] >= 2 && turn_start_[c] + quantum_ <= t * (1 + 1e-12)) key_[static_cast<size_t>(turn_[c])] = back_++;
  note_turns(t);
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
    const double cpu_share = c.at(k) * k / cpus_;
    if (quantum_ > 0) {
      rate[r] = runs(static_cast<int>(r)) ? cpu_share : 0.0;
      continue;
    }
    rate[r] = sticky * cpu_share / n[static_cast<size_t>(cpu_[r])] + (1 - sticky) * c.at(k);
  }
  return rate;
}

}  // namespace conveyor
