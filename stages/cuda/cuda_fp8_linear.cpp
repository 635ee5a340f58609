// FP8 linears on the GPU (see cuda_fp8_linear.h).
#include "stages/cuda/cuda_fp8_linear.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "kernels/cuda/gemv.h"
#include "runtime/core/cuda_buffer.h"
#include "runtime/core/cuda_check.h"
#include "runtime/core/error.h"

namespace conveyor {

Tensor upload_fp8_weight(Fp8HostWeight&& w, cudaStream_t stream) {
  CONVEYOR_CHECK(static_cast<int64_t>(w.codes.size()) == w.rows * w.cols &&
                     static_cast<int64_t>(w.scales.size()) == w.rows,
                 "cuda adopt_fp8: weight '", w.name, "' holds ", w.codes.size(), " codes and ", w.scales.size(),
                 " scales for [", w.rows, ", ", w.cols, "]");
  // Codes first, then the scales at a 16-byte aligned offset, in one allocation.
  const size_t code_bytes = (w.codes.size() + 15) / 16 * 16;
  const size_t scale_bytes = w.scales.size() * sizeof(float);
  auto buffer = std::make_shared<CudaBuffer>(code_bytes + scale_bytes, ("FP8 weight '" + w.name + "'").c_str());
  auto* base = static_cast<char*>(buffer->data());
  if (!w.codes.empty())
    CONVEYOR_CUDA_CHECK(cudaMemcpyAsync(base, w.codes.data(), w.codes.size(), cudaMemcpyHostToDevice, stream));
  if (scale_bytes > 0)
    CONVEYOR_CUDA_CHECK(
        cudaMemcpyAsync(base + code_bytes, w.scales.data(), scale_bytes, cudaMemcpyHostToDevice, stream));
  CONVEYOR_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::shared_ptr<void> storage(buffer, base);
  const auto* scales = reinterpret_cast<const float*>(base + code_bytes);
  return Tensor(std::move(storage), TensorView{base, w.rows, w.cols, DType::kU8, scales, w.input_scale});
}

void fp8_linear_cuda(Ops& ops, Fp8GemmRunner& gemm, const TensorView& out, const TensorView& x, const TensorView& w,
                     const TensorView& bias, bool accumulate, cudaStream_t stream) {
  auto quantize = [&](uint8_t* codes, float* scales) {
    quantize_rows_fp8_cuda(codes, scales, x.data, x.dtype, x.rows, x.cols, w.input_scale, stream);
  };
  fp8_linear_quantized_cuda(ops, gemm, out, x.rows, x.cols, quantize, w, bias, accumulate, stream);
}

void fp8_linear_quantized_cuda(Ops& ops, Fp8GemmRunner& gemm, const TensorView& out, int64_t m, int64_t k,
                               const Fp8Quantizer& quantize, const TensorView& w, const TensorView& bias,
                               bool accumulate, cudaStream_t stream) {
  CONVEYOR_CHECK(w.fp8() && w.dtype == DType::kU8 && k == w.cols && out.rows == m && out.cols == w.rows,
                 "cuda fp8 linear: x [", m, ", ", k, "], w [", w.rows, ", ", w.cols, "] (", dtype_name(w.dtype),
                 "), out [", out.rows, ", ", out.cols, "] do not fit");
  if (m == 0) return;
  Tensor codes = ops.empty(m, k, DType::kU8);
  Tensor x_scale = ops.empty(m, 1, DType::kF32);
  const auto* q = static_cast<const uint8_t*>(codes.view().data);
  const auto* wq = static_cast<const uint8_t*>(w.data);
  const int64_t n = w.rows;
  quantize(static_cast<uint8_t*>(codes.view().data), x_scale.view().f32());
  // The two implementations, each writing y (+)= the linear.
  auto via_gemv = [&](void* y, bool acc) {
    fp8_gemv_cuda(y, out.dtype, q, x_scale.view().f32(), wq, w.scales, bias.data, bias.dtype, m, n, k, acc, stream);
  };
  // cuBLASLt: the scales, bias and residual fused into the GEMM, or the fp32 GEMM and the epilogue.
  auto fused = [&](void* y, bool acc) {
    return gemm.run_scaled(y, out.dtype, q, x_scale.view().f32(), wq, w.scales, bias.data, bias.dtype, m, n, k, acc,
                           stream);
  };
  auto unfused = [&](void* y, bool acc) {
    Tensor sums = ops.empty(m, n, DType::kF32);
    gemm.run(sums.view().f32(), q, wq, m, n, k, stream);
    fp8_scale_epilogue_cuda(y, out.dtype, sums.view().f32(), x_scale.view().f32(), w.scales, bias.data, bias.dtype,
                            m, n, acc, stream);
  };
  auto via_lt = [&](void* y, bool acc) {
    std::optional<bool> use_fused = gemm.fused_choice(m, n, k, stream);
    if (!use_fused) {
      // The bucket's first eager call times both. They overwrite y, which the call below writes again;
      // only an accumulating y (holding the residual) needs a scratch copy, so no prefill step's peak
      // memory grows by a whole [m, n] output.
      Tensor scratch = acc ? ops.empty(m, n, out.dtype) : Tensor();
      void* into = acc ? scratch.view().data : y;
      use_fused = gemm.time_fused(m, n, k, [&] { return fused(into, false); }, [&] { unfused(into, false); }, stream);
    }
    if (!*use_fused || !fused(y, acc)) unfused(y, acc);
  };
  std::optional<bool> gemv = gemm.small_m_choice(m, n, k, stream);
  if (!gemv) {  // timing a shape's first eager call writes a scratch output, so y is added to once
    auto into_scratch = [&](auto& impl) {
      return [&] {
        Tensor scratch = ops.empty(m, n, out.dtype);
        impl(scratch.view().data, false);
      };
    };
    gemv = gemm.time_small_m(m, n, k, into_scratch(via_gemv), into_scratch(via_lt), stream);
  }
  if (*gemv) via_gemv(out.data, accumulate);
  else via_lt(out.data, accumulate);
}

}  // namespace conveyor
