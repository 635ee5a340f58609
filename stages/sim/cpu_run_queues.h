// Which CPU each computing rank of a CPU node runs on, as Linux's per-CPU run queues place them: a rank
// keeps its CPU while it computes; a rank that wakes to compute goes to its previous CPU if that is idle,
// else to an idle one, else back to its previous CPU's queue; a CPU left idle pulls a rank from a crowded
// one. While more ranks compute than there are CPUs, a CPU's share of the node goes to the ranks queued
// on it, so one rank runs doubled up while another has a CPU alone, and the pipeline's stages drift apart
// instead of slowing down alike (benchmarks/results/cpu/2026-12-05/pp3_path).
//
// How a CPU's share reaches the ranks queued on it: where doctor measured the scheduler's time slice
// (CoreSharing::quantum_s), in turns: the rank that runs keeps the whole share for a slice, then the next
// queued rank takes it; a rank that wakes onto a taken CPU runs first (the kernel's wake-up preemption: a
// rank that slept is owed CPU time), so a task shorter than a slice runs at full speed and the rank it
// interrupted waits (benchmarks/results/cpu/2026-12-06-r14). Without a slice measured, in equal parts at once,
// weighed by doctor's stickiness (CoreSharing::stickiness) against processor sharing (CoreSharing::at).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "stages/device_profile.h"

namespace conveyor {

class CpuRunQueues {
 public:
  // quantum: the scheduler's slice in seconds; 0: the queued ranks share their CPU at once.
  explicit CpuRunQueues(int cpus, double quantum = 0) : cpus_(cpus), quantum_(quantum) {}

  // The computing ranks changed at time t: busy[r] says whether rank r computes now (a rank that ends one
  // task and starts the next at the same instant never stopped, and keeps its CPU). Ranks that stopped leave
  // their CPU, ranks that started are placed, and no CPU holds two ranks more than another (an idle CPU pulls
  // a queued rank at once; the periodic balancer evens out larger gaps).
  void settle(const std::vector<bool>& busy, double t = 0);

  // Each busy rank's speed over its speed alone (0 for the others). With k ranks computing, k <= cpus:
  // c.at(k) each. Beyond, each CPU gives the node's k * at(k) / cpus: with a quantum, all of it to the rank
  // whose turn it is; without, in equal parts to the ranks queued on it, `sticky` of that plus 1 - sticky
  // of at(k).
  std::vector<double> rates(const CoreSharing& c, double sticky) const;

  // With a quantum: when the next turn on a shared CPU ends (infinity: none is shared), and the turns that
  // ended by t passed on (call at that time, then settle or rates again).
  double next_turn_end() const;
  void end_turns(double t);

  int cpu_of(int rank) const { return rank < static_cast<int>(cpu_.size()) ? cpu_[static_cast<size_t>(rank)] : -1; }
  // The CPU `rank` last ran on (-1: none yet).
  int last_cpu(int rank) const { return rank < static_cast<int>(prev_.size()) ? prev_[static_cast<size_t>(rank)] : -1; }
  // Whether `rank` runs now: it computes and it is its turn on its CPU (every computing rank, without a quantum).
  bool runs(int rank) const;

 private:
  int place(int rank) const;
  void balance();
  std::vector<int> load() const;
  void note_turns(double t);  // whose turn each CPU's is now; a new turn starts at t

  int cpus_;
  double quantum_;
  std::vector<int> cpu_;      // per rank: its CPU while computing, -1 otherwise
  std::vector<int> prev_;     // per rank: the CPU it last ran on
  std::vector<int64_t> key_;  // per rank: its place in its CPU's queue (lowest: its turn)
  int64_t back_ = 0, front_ = 0;
  std::vector<int> turn_;            // per CPU: the rank whose turn it is (-1: none)
  std::vector<double> turn_start_;  // per CPU: since when
  std::mt19937 rng_{1};  // which queued rank a pull takes: drawn, from a fixed seed (the same answer every time)
};

}  // namespace conveyor
