// FP8 linears on the GPU (see cuda_fp8_linear.h).
#include "stages/cuda/cuda_fp8_linear.h"

#include <memory>
#include <string>
#include <utility>

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
  CONVEYOR_CHECK(w.fp8() && w.dtype == DType::kU8 && x.cols == w.cols && out.rows == x.rows && out.cols == w.rows,
                 "cuda fp8 linear: x [", x.rows, ", ", x.cols, "], w [", w.rows, ", ", w.cols, "] (",
                 dtype_name(w.dtype), "), out [", out.rows, ", ", out.cols, "] do not fit");
  if (x.rows == 0) return;
  Tensor codes = ops.empty(x.rows, x.cols, DType::kU8);
  Tensor x_scale = ops.empty(x.rows, 1, DType::kF32);
  Tensor acc = ops.empty(x.rows, w.rows, DType::kF32);
  quantize_rows_fp8_cuda(static_cast<uint8_t*>(codes.view().data), x_scale.view().f32(), x.data, x.dtype, x.rows,
                         x.cols, w.input_scale, stream);
  gemm.run(acc.view().f32(), static_cast<const uint8_t*>(codes.view().data), static_cast<const uint8_t*>(w.data),
           x.rows, w.rows, x.cols, stream);
  fp8_scale_epilogue_cuda(out.data, out.dtype, acc.view().f32(), x_scale.view().f32(), w.scales, bias.data,
                          bias.dtype, x.rows, w.rows, accumulate, stream);
}

}  // namespace conveyor
