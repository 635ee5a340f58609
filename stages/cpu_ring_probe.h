// Doctor's ring probe on a CPU host (part of device.sharing): the speed a pipeline's rank gets with k of the
// node's ranks computing, measured in a pipeline. r ranks pass r tokens round a ring; each waits politely
// for its predecessor's message, computes a fixed number of calls, and sends on, as stages do. Beside the
// sharing probe's speed(k) (ranks that compute without pause), this speed includes what only a pipeline
// meets: ranks that wake, nap and land on a CPU the scheduler picks at that moment, and a CPU left idle
// beside a doubled one (benchmarks/results/cpu/2026-12-06/pp4_path). Doctor writes it as
// device.sharing.pipeline_speed; the simulator's run queues take it where a node holds more pipeline ranks
// than CPUs (CoreSharing::in_pipeline).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace conveyor {

// One ring rank's record, in ns on the node's steady clock: its compute phases [begin, end) and the end of
// each call in them (a call's start is the previous call's end, or its phase's begin).
struct RingTrace {
  std::vector<std::pair<int64_t, int64_t>> phases;
  std::vector<int64_t> call_ends;
};

// Calls made while k ranks computed (k at each call's midpoint, the ring's own ranks), over rings.
struct RingSpeed {
  std::vector<double> calls, seconds;  // [k - 1]
  // Adds one ring's traces (one per rank, phases of different rings must not overlap in time); calls
  // starting before `from` (the ring's start-up) are not counted.
  void add(const std::vector<RingTrace>& traces, int64_t from);
  // Adds another reading's calls and seconds per k (rings pooled).
  void merge(const RingSpeed& other);
  // speed[k - 1]: the solo time of those calls over the time they took; 0 where fewer than `min_calls`
  // calls met k ranks (never met, or too few calls to be more than one moment of the host).
  std::vector<double> speed(double solo_call_s, double min_calls = 1) const;
};

// Per k, the median of the rings' speed[k - 1] where they met k ranks; where none did, pooled[k - 1] (the rings'
// calls together, for a k each ring meets too few times to read alone), else 0.
std::vector<double> median_speed(const std::vector<std::vector<double>>& rings, const std::vector<double>& pooled = {});

// Collective over the node's ranks (more than its CPUs, else null: with a CPU each, a rank's place does not
// decide its speed): the ring with the node's first r ranks (the others wait without spinning) for
// r = cpus + 1 .. the node's ranks, `call` being one call of the sharing probe
// and `solo_calls_per_s` its rate alone. Returns {by_ranks: [{ranks, speed: [k = 1 .. r]}], method}
// on every rank.
nlohmann::json measure_ring_speed(MPI_Comm node, const std::function<void()>& call, double solo_calls_per_s);

}  // namespace conveyor
