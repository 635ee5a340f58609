// Doctor's quantum probe on a CPU host (part of device.sharing): how the scheduler shares one CPU between two
// ranks that both want it. Two threads of rank 0, pinned to the CPU it runs on, compute in steps of ~2 us and
// stamp the clock after each; a gap in a thread's stamps is a time it did not run, so the runs between gaps
// are its turns (quantum_us: their median). Then one thread computes without a pause while the other naps as
// wait_politely does and computes 2 ms at a time: its wall time over its time alone is woken_stretch (1.0: a
// rank that wakes onto a taken CPU runs first, as Linux's wake-up preemption gives it; 2.0 and more: it shares
// the CPU from the start or waits a turn). This machine (Linux 6.18, HZ 250): turns of 4.0 ms, and 78-98% of
// the bursts ran first (x1.00), the others waited one turn (x3.0). The simulator's run queues take turns of
// quantum_us and put a waking rank first (stages/sim/cpu_run_queues.h).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace conveyor {

// The lengths (seconds) of a thread's runs in its stamps (ns, ascending): consecutive stamps more than gap_ns
// apart end a run. The first and the last run, cut by the window, are left out.
std::vector<double> interior_runs(const std::vector<int64_t>& stamps_ns, int64_t gap_ns);

// Collective over the node's ranks: rank 0 measures, the others wait without spinning. Returns {quantum_us,
// turns, woken_stretch, woken_first, bursts, method} on every rank.
nlohmann::json measure_cpu_quantum(MPI_Comm node);

}  // namespace conveyor
