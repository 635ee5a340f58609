// MPI pieces the CPU doctor's probes share (cpu_probe.cpp, cpu_placement_probe.cpp, cpu_ring_probe.cpp):
// waiting the way a pipeline stage waits, and bringing each rank's samples to rank 0.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <vector>

namespace conveyor {

// Tests `r` with naps of 2 us doubling to 100 us, as wait_politely (stages/cpu_transport.h) waits: MPI's
// blocking calls busy-poll, which would take a CPU from the ranks being measured.
void wait_napping(MPI_Request* r);

// Sleeps until `until` the way wait_politely waits for a message: naps of 2 us doubling up to 100 us. Each
// nap ends in a wake-up, and each wake-up is a chance for the scheduler to place the rank anew; a plain
// sleep_until would wake once.
void nap_until(std::chrono::steady_clock::time_point until);

// A barrier of `comm` waited for by wait_napping.
void polite_barrier(MPI_Comm comm);

// Every rank's `mine` on rank 0 of `comm`, by rank; the other ranks get none.
std::vector<std::vector<int64_t>> gather_to_root(MPI_Comm comm, const std::vector<int64_t>& mine);

}  // namespace conveyor
