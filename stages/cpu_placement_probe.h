// Doctor's stayer probe on a CPU host (part of device.sharing): where Linux puts ranks while more of them
// compute than there are CPUs. One rank computes without sleeping (the stayer); the others alternate
// compute with the naps of wait_politely, as pipeline stages do. Every rank notes the CPU it ran on after
// each call. The samples say whether a rank's place holds through a compute phase (stickiness: per-CPU
// queues that keep their ranks, which the simulator's run queues assume, stages/sim/cpu_run_queues.h) or
// changes within it (the ranks share the CPUs evenly after all), and how often the stayer is doubled up.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace conveyor {

// One rank's record: its compute phases [begin, end) and its CPU after each call, in ns on the node's
// shared steady clock.
struct PlacementTrace {
  std::vector<std::pair<int64_t, int64_t>> phases;
  std::vector<std::pair<int64_t, int>> cpu_at;  // (time, CPU), ascending time
};

struct StayerStats {
  double crowded_s = 0;  // time with more ranks computing than CPUs (each rank's CPU known)
  double doubled_s = 0;  // of it, time the stayer (traces[0]) shared its CPU with another computing rank
  int64_t moves = 0;     // changes of who shares a CPU with whom while the same ranks kept computing
  // How a sleeper's place holds over one compute phase, among its phases crowded for 2 ms or more: with f
  // the share of a phase's crowded time it spent doubled up, var(f) / (mean(f) (1 - mean(f))): 1 when each phase is
  // doubled up throughout or not at all (per-CPU queues that keep their ranks), 0 when every phase gets the
  // same mix (ranks moved so often that they share the CPUs evenly). -1: no such phases.
  double stickiness = -1;
  int phases = 0;  // the phases it was read from
  double share() const { return crowded_s > 0 ? doubled_s / crowded_s : 0.0; }
};

// Reads the traces on a grid of `step_ns` between `from` and `to`: at each point, the ranks inside a
// phase with a CPU sample in that phase so far, and the stayer's (traces[0]) CPU against theirs.
StayerStats stayer_stats(const std::vector<PlacementTrace>& traces, int cpus, int64_t from, int64_t to, int64_t step_ns);

// Collective over the node's ranks (`node`, at least cpus + 1 of them, else null): the probe with the
// node's first `ranks` ranks (the others wait without spinning), for ranks = cpus + 1 .. the node's
// ranks. Returns {stayer_share (with all the node's ranks), by_ranks: [...], method} on every rank.
nlohmann::json measure_stayer_placement(MPI_Comm node);

}  // namespace conveyor
