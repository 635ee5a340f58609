// FP8 (e4m3) linears on the GPU, the twins of kernels/cpu/fp8.h: per-token (per-row) activation
// quantization with compressed-tensors' scale (amax / 448, zero -> fp32 epsilon), a static-scale
// variant, the cuBLASLt e4m3 x e4m3 -> fp32 GEMM (TN, as Hopper FP8 requires) and the epilogue that
// applies row x column scales, the bias and optionally the residual in one pass to bf16/f16/f32.
// Launchers allocate nothing: the fp32 accumulator and the codes live in caller memory.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "kernels/cuda/gemm.h"
#include "kernels/dtype.h"

namespace conveyor {

// q[r, c] = e4m3(clamp(x[r, c] / s[r])), s[r] = amax(row r) / 448 (dynamic), or s[r] = static_scale
// for every row when static_scale > 0. x is kBF16, kF16 or kF32.
void quantize_rows_fp8_cuda(uint8_t* q,            // [rows, cols]
                            float* scales,         // [rows]
                            const void* x,         // [rows, cols]
                            DType dt, int64_t rows, int64_t cols, float static_scale, cudaStream_t stream);

// quantize_rows_fp8_cuda of rms_norm_cuda(x, w, eps) (rms_norm.h) and of silu_mul_cuda(gate_up)
// (silu_mul.h), without writing the rows between: the same codes and scales in one kernel. dt: kBF16 or
// kF16. Return false, having launched nothing, where the fused kernel does not take the rows (f32, a row
// that is not whole 16-byte packs or longer than 32,768 elements, a pointer not 16-byte aligned, q not
// 8-byte aligned): the caller then runs the two kernels.
bool rms_norm_quantize_fp8_cuda(uint8_t* q,         // [rows, cols]
                                float* scales,      // [rows]
                                const void* x,      // [rows, cols]
                                const void* w,      // [cols], the norm's weight
                                DType dt, int64_t rows, int64_t cols, float eps, float static_scale,
                                cudaStream_t stream);
bool silu_mul_quantize_fp8_cuda(uint8_t* q,            // [rows, inter]
                                float* scales,         // [rows]
                                const void* gate_up,   // [rows, 2 * inter], gate | up
                                DType dt, int64_t rows, int64_t inter, float static_scale, cudaStream_t stream);

// y[i, j] = acc[i, j] * a_scale[i] * b_scale[j] + bias[j] (+ y[i, j] when accumulate), y in `out`
// (bias, when given, in `out` too, or kF32).
void fp8_scale_epilogue_cuda(void* y, DType out, const float* acc, const float* a_scale, const float* b_scale,
                             const void* bias, DType bias_dt, int64_t m, int64_t n, bool accumulate,
                             cudaStream_t stream);

// acc[m, n] = a[m, k] b[n, k]^T over e4m3 codes, fp32 out, through cuBLASLt (heuristic first choice,
// cached per shape), or with the scales fused (run_scaled). Requires k % 16 == 0 and n % 4 == 0 (FP8's
// 16-byte leading dimensions). One handle; the workspace is the caller's.
class Fp8GemmRunner {
 public:
  Fp8GemmRunner(void* workspace, size_t workspace_bytes);
  ~Fp8GemmRunner();
  Fp8GemmRunner(const Fp8GemmRunner&) = delete;
  Fp8GemmRunner& operator=(const Fp8GemmRunner&) = delete;
  void run(float* acc, const uint8_t* a, const uint8_t* b, int64_t m, int64_t n, int64_t k, cudaStream_t stream);
  // The whole linear in one cuBLASLt call: y[i, j] = acc[i, j] * a_scale[i] * b_scale[j] + bias[j]
  // (+ y[i, j] when accumulate), as fp8_scale_epilogue_cuda after run(), with the scales, bias and
  // residual applied in the GEMM's epilogue (outer-vector scaling) and y written once in `out`. Returns
  // false, having written nothing, where it cannot: out not bf16/f16, a bias not in `out`, n % 8 != 0
  // (y's rows must be 16-byte multiples), a shape or pointer run() would refuse, or no cuBLASLt
  // algorithm for it (remembered per shape: a GPU or a cuBLASLt without outer-vector FP8 scaling).
  // The caller then runs run() and the epilogue.
  bool run_scaled(void* y,                // [m, n] in out
                  DType out,              // kBF16 or kF16
                  const uint8_t* a,       // [m, k] e4m3 codes (the activations)
                  const float* a_scale,   // [m]
                  const uint8_t* b,       // [n, k] e4m3 codes (the weights)
                  const float* b_scale,   // [n]
                  const void* bias,       // [n] in bias_dt, or nullptr
                  DType bias_dt, int64_t m, int64_t n, int64_t k, bool accumulate, cudaStream_t stream);

  // Whether the linear of this shape runs fp8_gemv_cuda (gemv.h) rather than run() plus
  // fp8_scale_epilogue_cuda, when that is decided: by m > kGemvMaxRows (cuBLASLt), by the policy
  // (kAlways / kNever), by an earlier timing of the shape, or, while `stream` is being captured, gemv
  // untimed (timed at the shape's next eager call). nullopt: time it (time_small_m). The runner's
  // default policy is kNever; runtime.fp8_gemv (auto by default) sets it.
  std::optional<bool> small_m_choice(int64_t m, int64_t n, int64_t k, cudaStream_t stream) const;
  // kAuto's first eager call of a shape: times `gemv` and `lt` (each launching the whole linear on
  // `stream` into scratch output), keeps the faster and returns whether it is gemv.
  bool time_small_m(int64_t m, int64_t n, int64_t k, const std::function<void()>& gemv,
                    const std::function<void()>& lt, cudaStream_t stream);
  void set_gemv_policy(GemvPolicy policy);

  // Whether the cuBLASLt linear of this shape runs run_scaled rather than run() plus the epilogue, as
  // timed for the shape's bucket of m (gemm_tuning_bucket): neither wins everywhere (on an H100 with
  // cuBLASLt 13.1 the fused path has one algorithm, slower as a GEMM than the fp32 one's best, so it
  // loses at small m and at k = 14,336, and wins where the epilogue's fp32 round trip costs more).
  // Untimed: nullopt, or false while `stream` is being captured (timed at the next eager call).
  std::optional<bool> fused_choice(int64_t m, int64_t n, int64_t k, cudaStream_t stream) const;
  // The bucket's first eager call: times `fused` (run_scaled, returning false when it declines, which
  // makes it lose) and `unfused` (each writing an output y may take), keeps the faster and returns
  // whether it is fused.
  bool time_fused(int64_t m, int64_t n, int64_t k, const std::function<bool()>& fused,
                  const std::function<void()>& unfused, cudaStream_t stream);
  // One line per shape decided: "m=1 n=4096 k=4096 e4m3: gemv 9.1 us, cublaslt 21.3 us", and per
  // bucket timed for fusion: "m<=1024 n=4096 k=4096 e4m3: fused (fused 28.1 us, fp32+epilogue 44.8 us)".
  std::string describe() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace conveyor
