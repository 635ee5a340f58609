// Where doctor kept its hop probe's samples (CoreSharing::hop_samples_s, busy_hop_samples_s), each simulated
// hop takes one drawn at random, and one run's timeline is one draw of many: a stage's bubble at pp 3 or
// pp 4 moves by up to 2 points from one seed to another (benchmarks/results/cpu/2026-12-06/hop_seeds). A
// layout's prediction is the mean of kHopDraws runs, each drawn from its own fixed seed (1 .. kHopDraws):
// the same answer every time, and not one draw's (means of other seeds lie within 1 point of it).
#pragma once

#include <vector>

#include "stages/sim/schedule_sim.h"

namespace conveyor {

// Runs simulated per layout where hops are drawn: the mean's spread is about a draw's over sqrt(8).
constexpr int kHopDraws = 8;

// The mean of one layout's simulated runs (the same layout, workload and budget; at least one): the run
// time, the TTFT / TPOT percentiles and each stage's compute, all-reduce, overhead and send times are
// averaged; the counts (plans, preemptions, peak running) and the recorded spans are the first run's.
// Bubbles and throughputs are not set: simulate_layout derives them from the mean times.
SimResult mean_of_draws(const std::vector<SimResult>& draws);

}  // namespace conveyor
