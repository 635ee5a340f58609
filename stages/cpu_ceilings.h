// The CPU backend's ceilings for a roofline, measured on this host with this rank's OpenMP threads:
// memory bandwidth from a STREAM-style triad over arrays far larger than the caches, and FLOP/s of the
// project's own fp32 matmul (matmul_ref). A bench on the CPU backend compares itself with these, not
// with a GPU's peaks. Takes well under a second; local to the rank, no MPI.
#pragma once

namespace conveyor {

struct CpuCeilings {
  double bandwidth = 0;  // bytes/s, best triad pass (3 arrays of 4-byte floats, write-allocate not counted)
  double flops = 0;      // FLOP/s, best of the timed matmul_ref passes
};

CpuCeilings measure_cpu_ceilings();

}  // namespace conveyor
