// How GemmRunner (kernels/cuda/gemm.h) times cuBLASLt on a shape's first use, as a pure rule: the
// runner follows it, and the schedule simulator (stages/sim/) charges what it costs, so neither the
// simulator nor a CPU-only build needs the runner.
#pragma once

#include <cstdint>

namespace conveyor {

constexpr int64_t kGemmExactTuningRows = 16;  // up to here (the gemv's rows) every m is timed itself
constexpr int kGemmTimedCandidates = 8;       // cuBLASLt heuristic results timed
constexpr int kGemmTimedRuns = 5;             // timed runs per candidate, after one warm-up run

// The m whose timing a shape shares: m itself up to kGemmExactTuningRows, else the next power of two.
// Prefill and mixed steps give a new m almost every step; the first m of a bucket is timed and the
// others of it take that choice.
constexpr int64_t gemm_tuning_bucket(int64_t m) {
  if (m <= kGemmExactTuningRows) return m;
  int64_t b = kGemmExactTuningRows;
  while (b < m) b *= 2;
  return b;
}

// Runs of a shape's GEMM that timing its first use costs: every candidate's warm-up and timed runs.
constexpr int kGemmTuningRuns = kGemmTimedCandidates * (1 + kGemmTimedRuns);

}  // namespace conveyor
