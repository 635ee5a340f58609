// How GemmRunner (kernels/cuda/gemm.h) times cuBLASLt on a shape's first use, as a pure rule: the
// runner follows it, and the schedule simulator (stages/sim/) charges what it costs, so neither the
// simulator nor a CPU-only build needs the runner.
#pragma once

#include <cstdint>
#include <vector>

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

// The rows a start-up warm-up (runtime.gemm_warmup) runs each GEMM shape at, so that no step of the run
// times one: the decode buckets up to 16 (1, 2, 4, 8, 16: the CUDA graphs' sizes), then one m in every
// power-of-two bucket up to max_rows, the last at max_rows itself (the buffers are sized for it). Empty
// when max_rows < 1.
inline std::vector<int64_t> gemm_warmup_rows(int64_t max_rows) {
  std::vector<int64_t> rows;
  for (int64_t m = 1; m <= max_rows && m <= kGemmExactTuningRows; m *= 2) rows.push_back(m);
  for (int64_t b = 2 * kGemmExactTuningRows; b < max_rows; b *= 2) rows.push_back(b);
  if (max_rows > kGemmExactTuningRows) rows.push_back(max_rows);
  return rows;
}

}  // namespace conveyor
