// The fused decode linears of the CUDA backend (see cuda_fused_linear.h).
#include "stages/cuda/cuda_fused_linear.h"

#include "kernels/cuda/gemv.h"
#include "runtime/core/env_switch.h"

namespace conveyor {

bool fused_gemv_linear(GemmRunner& gemm, DType dt, const TensorView& out, const TensorView& src, const NormView* norm,
                       const TensorView& w, const TensorView& bias, bool accumulate, cudaStream_t stream) {
  static const bool on = env_switch_opt_in("CONVEYOR_FUSED_GEMV");
  const int64_t m = src.rows, k = norm != nullptr ? src.cols : src.cols / 2, n = w.rows;
  if (!on || w.fp8() || src.dtype != dt || w.dtype != dt || w.cols != k || out.rows != m || out.cols != n ||
      (norm == nullptr && src.cols % 2 != 0) || (norm != nullptr && norm->weight.dtype != dt) ||
      (bias.data != nullptr && bias.dtype != dt) || (accumulate && out.dtype != dt) ||
      !gemv_fused_takes(norm != nullptr, m, n, k, dt))
    return false;
  // The shape's race, as the unfused linear would run it (src stands in for x: timing reads any values).
  if (!gemm.picks_gemv(out.data, out.dtype, src.data, w.data, dt, bias.data, m, n, k, stream, accumulate)) return false;
  if (norm != nullptr) {
    gemv_rms_norm_cuda(out.data, out.dtype, src.data, norm->weight.data, norm->eps, w.data, bias.data, m, n, k,
                       accumulate, dt, stream);
  } else {
    gemv_silu_mul_cuda(out.data, out.dtype, src.data, w.data, bias.data, m, n, k, accumulate, dt, stream);
  }
  return true;
}

}  // namespace conveyor
