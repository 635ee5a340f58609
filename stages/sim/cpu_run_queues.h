// Which CPU each computing rank of a CPU node runs on, as Linux's per-CPU run queues place them: a rank
// keeps its CPU while it computes; a rank that wakes to compute goes to its previous CPU if that is idle,
// else to an idle one, else back to its previous CPU's queue; a CPU left idle pulls a rank from a crowded
// one. While more ranks compute than there are CPUs, a CPU's share of the node goes to the ranks queued
// on it in equal parts, so one rank runs doubled up at half speed while another has a CPU alone, and the
// pipeline's stages drift apart instead of slowing down alike (benchmarks/results/cpu/2026-12-05/pp3_path).
// How long a placement holds is doctor's stickiness (CoreSharing::stickiness): ranks that the kernel moves
// often within a task share the CPUs evenly after all (processor sharing, CoreSharing::at).
#pragma once

#include <random>
#include <vector>

#include "stages/device_profile.h"

namespace conveyor {

class CpuRunQueues {
 public:
  explicit CpuRunQueues(int cpus) : cpus_(cpus) {}

  // The computing ranks changed: busy[r] says whether rank r computes now (a rank that ends one task and
  // starts the next at the same instant never stopped, and keeps its CPU). Ranks that stopped leave their
  // CPU, ranks that started are placed, and no CPU holds two ranks more than another (an idle CPU pulls at
  // once; the periodic balancer evens out larger gaps).
  void settle(const std::vector<bool>& busy);

  // Each busy rank's speed over its speed alone (0 for the others). With k ranks computing, k <= cpus:
  // c.at(k) each. Beyond: `sticky` of the run-queue speed (each CPU gives the node's k * at(k) / cpus in
  // equal parts to the ranks queued on it) plus 1 - sticky of at(k).
  std::vector<double> rates(const CoreSharing& c, double sticky) const;

  int cpu_of(int rank) const { return rank < static_cast<int>(cpu_.size()) ? cpu_[static_cast<size_t>(rank)] : -1; }
  // The CPU `rank` last ran on (-1: none yet).
  int last_cpu(int rank) const { return rank < static_cast<int>(prev_.size()) ? prev_[static_cast<size_t>(rank)] : -1; }

 private:
  int place(int rank) const;
  void balance();
  std::vector<int> load() const;

  int cpus_;
  std::vector<int> cpu_;   // per rank: its CPU while computing, -1 otherwise
  std::vector<int> prev_;  // per rank: the CPU it last ran on
  std::mt19937 rng_{1};    // which queued rank a pull takes: drawn, from a fixed seed (the same answer every time)
};

}  // namespace conveyor
