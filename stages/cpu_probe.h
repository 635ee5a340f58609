// Device ceilings of the CPU backend behind `conveyor doctor` (the CPU twin of kernel_probe.h): the
// project's fp32 kernels timed on this rank with its OpenMP threads, in the JSON shape the planner and
// the simulator read (stages/device_profile.h), plus what only a CPU host has: how fast a rank runs while
// k ranks of the node compute at once (they share cores and memory bandwidth).
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace conveyor {

// The "device" section for this rank's CPU (one rank, no MPI): matmul_ref at decode row buckets and at
// prefill rows, paged attention, the greedy sampler, the small ops' fixed cost, triad bandwidth.
nlohmann::json measure_cpu_device();

// Collective over `comm`: for k = 1 .. the ranks of this node, k ranks run the same decode-shaped
// matmul_ref at once (the others wait without spinning); "speed"[k - 1] is a rank's speed then over its
// speed alone. Returned on every rank; goes under device.sharing.
nlohmann::json measure_core_sharing(MPI_Comm comm);

// The scheduler's slice as the simulator's cpu_node_rates (stages/sim/schedule_sim.h) takes it, from
// doctor's TP round probe: a pair alternating decode-sized work and an all-reduce takes alone_s per round
// with the node's other ranks idle (2 ranks computing, each at speed[1]) and busy_s beside k - 2 ranks
// that compute without pause (k = speed.size() ranks on fewer CPUs). With the pair's turn g = alone_s *
// speed[1] (solo seconds) and the co-runners' s, the pair's rate is k speed[k-1] g / (2 g + (k - 2) s)
// = g / busy_s, so s = (k speed[k-1] busy_s - 2 g) / (k - 2) (0 when the pair kept its even share).
double slice_from_tp_rounds(double alone_s, double busy_s, const std::vector<double>& speed);

// Collective over `comm`: rank 0 measures measure_cpu_device() while the others wait without spinning
// (a busy-polling peer would take its cores), then all measure the sharing. The section on rank 0,
// null on the others.
nlohmann::json measure_cpu_host(MPI_Comm comm);

// The CPU section as doctor prints it (empty for null).
std::string format_cpu_device(const nlohmann::json& section);

}  // namespace conveyor
