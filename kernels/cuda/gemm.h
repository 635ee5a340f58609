// Dense GEMM for every projection on the GPU: y = x w^T (+ bias) (+ y) through cuBLASLt or, for
// m <= kGemvMaxRows decode tokens, the gemv kernel (gemv.h); the twin of kernels/cpu/matmul.h. One
// runner per device (one handle, one caller-owned workspace); the implementation for each shape is chosen once
// (cuBLASLt heuristic candidates and gemv timed on first use) and cached. Not thread-safe: use one
// runner per host thread, on the device that was current when it was constructed.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "kernels/dtype.h"

namespace conveyor {

// Whether the gemv kernel competes for shapes with m <= kGemvMaxRows: timed against cuBLASLt
// (kAuto), never used (kNever: cuBLASLt alone) or always used (kAlways: no timing, for tests/benches).
enum class GemvPolicy { kAuto, kNever, kAlways };

// cuBLASLt's workspace inside a GemmRunner's workspace, by default.
constexpr size_t kGemmLtWorkspaceBytes = size_t{32} << 20;

// Device bytes a GemmRunner works in: `lt_bytes` for cuBLASLt and the scratch copy of y that timing
// an accumulating shape writes, for up to max_m x max_accumulate_n 16-bit outputs (accumulate keeps y
// in the input dtype). Sized at start-up from the largest step; allocated once by the caller.
size_t gemm_workspace_bytes(int64_t max_m, int64_t max_accumulate_n, size_t lt_bytes = kGemmLtWorkspaceBytes);

// Largest power of two <= 16 dividing the address: the alignment cuBLASLt is told it may rely on (its
// default assumption is 256 bytes, which views into a larger buffer need not meet).
uint32_t gemm_alignment_of(const void* p);

class GemmRunner {
 public:
  // workspace: device memory of gemm_workspace_bytes(..., lt_bytes) bytes (or more), owned by the
  // caller and outliving the runner. The runner allocates no device memory itself; an accumulating
  // shape larger than the scratch sized for is an Error at its first (timed) call.
  GemmRunner(void* workspace, size_t workspace_bytes, size_t lt_bytes = kGemmLtWorkspaceBytes);
  ~GemmRunner();
  GemmRunner(const GemmRunner&) = delete;
  GemmRunner& operator=(const GemmRunner&) = delete;

  // y[m, n] = x[m, k] * w[n, k]^T (+ bias[n]) (+ y[m, n] if accumulate); x, w (and bias) in `ab`
  // (kBF16/kF16), y in `out` (the same as ab, or kF32 for LM-head logits; accumulate needs out ==
  // ab). Row-major, contiguous, fp32 accumulation, one rounding to `out`.
  // Requires k % 8 == 0 and x, w 16-byte aligned (rows of 16-byte multiples keep the tensor-core
  // loads vectorised); any m >= 0 and n >= 1. y must not alias x, w or bias.
  // The first call for a new shape times up to 8 cuBLASLt candidates (and gemv when m is in its
  // range) on `stream` and waits for them (a one-off cost; with accumulate they write a scratch copy
  // of y); above kGemvMaxRows a shape whose m shares its power-of-two bucket with a timed one takes
  // that choice untimed (prefill steps vary m every step). While the stream is being captured into a
  // graph it takes the heuristic's first cuBLASLt algorithm, or the choice of an earlier timed call
  // of the same shape or bucket.
  void run(void* y, DType out, const void* x, const void* w, DType ab, const void* bias,
           int64_t m, int64_t n, int64_t k, cudaStream_t stream, bool accumulate = false);

  // Whether run() with these arguments would run the gemv kernel: the shape is planned (and timed, as run()
  // times it, writing y or its scratch copy) and nothing else is run. For a caller that fuses the op before
  // into the gemv (gemv.h, gemv_rms_norm_cuda) where the gemv wins, x standing in for the fused input.
  bool picks_gemv(void* y, DType out, const void* x, const void* w, DType ab, const void* bias, int64_t m, int64_t n,
                  int64_t k, cudaStream_t stream, bool accumulate = false);

  // Timing candidates on first use is on by default; off, the heuristic's first choice is used.
  void set_autotune(bool on);
  // kAuto by default. Shapes already tuned keep their timed choice under kAuto; kNever and kAlways
  // apply at once.
  void set_gemv_policy(GemvPolicy policy);
  size_t cached_shapes() const;  // distinct shapes planned so far
  // One line per planned shape: "m=1 n=4096 k=4096 bf16->bf16 [bias] [acc]: gemv (8.1 us)" or
  // ": cublaslt algo 2/8 (9.0 us)", ": cublaslt algo 2/8 (as timed at m=300)" or ": cublaslt heuristic
  // (untimed)"; for logs and benchmarks.
  std::string describe() const;

 private:
  struct Plan;
  struct Impl;
  Plan* planned(void* y, DType out, const void* x, const void* w, DType ab, const void* bias, int64_t m, int64_t n,
                int64_t k, cudaStream_t stream, bool accumulate);
  std::unique_ptr<Impl> impl_;
};

}  // namespace conveyor
