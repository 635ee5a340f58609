// Device buffers (CudaBuffer) and 16-bit conversions for the kernel GPU tests: inputs are rounded to the
// storage dtype on the host first, so the fp32 CPU twin sees exactly what the GPU sees.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "kernels/dtype.h"
#include "runtime/core/cuda_buffer.h"

namespace conveyor::testing {

inline float round_to(float x, DType dt) {
  if (dt == DType::kBF16) return bf16_to_float(float_to_bf16(x));
  if (dt == DType::kF16) return f16_to_float(float_to_f16(x));
  return x;
}

inline void round_all(std::vector<float>& v, DType dt) {
  for (float& x : v) x = round_to(x, dt);
}

// Host floats as a device buffer of dtype dt (kBF16, kF16 or kF32).
inline CudaBuffer upload(const std::vector<float>& v, DType dt) {
  if (dt == DType::kF32) return CudaBuffer::from(v);
  std::vector<uint16_t> bits(v.size());
  for (size_t i = 0; i < v.size(); ++i) bits[i] = dt == DType::kBF16 ? float_to_bf16(v[i]) : float_to_f16(v[i]);
  return CudaBuffer::from(bits);
}

inline std::vector<float> download(const CudaBuffer& b, DType dt) {
  if (dt == DType::kF32) return b.to_host<float>();
  const std::vector<uint16_t> bits = b.to_host<uint16_t>();
  std::vector<float> v(bits.size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = dt == DType::kBF16 ? bf16_to_float(bits[i]) : f16_to_float(bits[i]);
  return v;
}

}  // namespace conveyor::testing
