// Dense GEMM for every projection on the GPU: y = x w^T (+ bias) through cuBLASLt, the twin of
// kernels/cpu/matmul.h. One runner per device (one handle, one workspace); the algorithm for each
// shape is chosen once (heuristic candidates timed on first use) and cached. Not thread-safe: use one
// runner per host thread, on the device that was current when it was constructed.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/dtype.h"

namespace conveyor {

class GemmRunner {
 public:
  explicit GemmRunner(size_t workspace_bytes = 32u << 20);
  ~GemmRunner();
  GemmRunner(const GemmRunner&) = delete;
  GemmRunner& operator=(const GemmRunner&) = delete;

  // y[m, n] = x[m, k] * w[n, k]^T (+ bias[n]); x, w (and bias) in `ab` (kBF16/kF16), y in `out`
  // (the same as ab, or kF32 for LM-head logits). Row-major, contiguous, fp32 accumulation.
  // Requires k % 8 == 0 and x, w 16-byte aligned (rows of 16-byte multiples keep the tensor-core
  // loads vectorised); any m >= 0 and n >= 1. y must not alias x, w or bias.
  // The first call for a new shape times up to 8 cuBLASLt candidates on `stream` and waits for them
  // (a one-off cost); while the stream is being captured into a graph it takes the heuristic's first.
  void run(void* y, DType out, const void* x, const void* w, DType ab, const void* bias,
           int64_t m, int64_t n, int64_t k, cudaStream_t stream);

  // Timing candidates on first use is on by default; off, the heuristic's first choice is used.
  void set_autotune(bool on);
  size_t cached_shapes() const;  // distinct shapes planned so far

 private:
  struct Plan;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace conveyor
