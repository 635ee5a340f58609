// Helpers for the dense-kernel GPU tests: CudaBuffer, a GemmRunner with its own workspace, upload of fp32 values
// stored as bf16/f16/f32 and the way back, and per-dtype tolerances. Host values are rounded to the
// storage type first so the CPU twin sees exactly what the GPU reads.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/cuda/gemm.h"
#include "runtime/core/cuda_buffer.h"
#include "runtime/core/cuda_check.h"

namespace conveyor::testing {

// A CudaBuffer (runtime/core/cuda_buffer.h) that holds at least one byte, so an empty case still
// passes a valid pointer; bytes() is what was asked for.
class TestBuffer : public CudaBuffer {
 public:
  explicit TestBuffer(size_t bytes) : CudaBuffer(bytes == 0 ? 1 : bytes, "a test buffer"), asked_(bytes) {}
  void* get() const { return data(); }
  size_t bytes() const { return asked_; }

 private:
  size_t asked_ = 0;
};

// Owns a workspace first, then the GemmRunner that uses it: sized for accumulating shapes up to
// max_m x max_n, which covers every shape these tests time.
class WorkspaceOwner {
 protected:
  explicit WorkspaceOwner(size_t bytes) : workspace_(bytes, "a test GEMM workspace") {}
  CudaBuffer workspace_;
};

class TestGemm : private WorkspaceOwner, public GemmRunner {
 public:
  explicit TestGemm(size_t lt_bytes = kGemmLtWorkspaceBytes, int64_t max_m = 4096, int64_t max_n = 16384)
      : WorkspaceOwner(gemm_workspace_bytes(max_m, max_n, lt_bytes)),
        GemmRunner(workspace_.data(), workspace_.bytes(), lt_bytes) {}
};

inline float round_to(float v, DType dt) {
  switch (dt) {
    case DType::kBF16: return bf16_to_float(float_to_bf16(v));
    case DType::kF16: return f16_to_float(float_to_f16(v));
    default: return v;
  }
}

inline std::vector<float> round_all(std::vector<float> v, DType dt) {
  for (float& x : v) x = round_to(x, dt);
  return v;
}

// Encodes values as dt (kF32, kBF16, kF16) into raw bytes.
inline std::vector<uint8_t> encode(const std::vector<float>& v, DType dt) {
  std::vector<uint8_t> bytes(v.size() * dtype_size(dt));
  for (size_t i = 0; i < v.size(); ++i) {
    if (dt == DType::kF32) {
      std::memcpy(bytes.data() + 4 * i, &v[i], 4);
    } else {
      const uint16_t h = dt == DType::kBF16 ? float_to_bf16(v[i]) : float_to_f16(v[i]);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
  }
  return bytes;
}

inline std::vector<float> decode(const std::vector<uint8_t>& bytes, DType dt) {
  std::vector<float> v(bytes.size() / dtype_size(dt));
  for (size_t i = 0; i < v.size(); ++i) {
    if (dt == DType::kF32) {
      std::memcpy(&v[i], bytes.data() + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      v[i] = dt == DType::kBF16 ? bf16_to_float(h) : f16_to_float(h);
    }
  }
  return v;
}

// Copies `v` stored as dt into dst (which must hold v.size() elements of dt).
inline void upload_into(void* dst, const std::vector<float>& v, DType dt) {
  const auto bytes = encode(v, dt);
  CONVEYOR_CUDA_CHECK(cudaMemcpy(dst, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
}

inline TestBuffer upload(const std::vector<float>& v, DType dt) {
  TestBuffer buf(v.size() * dtype_size(dt));
  upload_into(buf.get(), v, dt);
  return buf;
}

// Waits for the device, then reads n elements of dt.
inline std::vector<float> download(const void* src, size_t n, DType dt) {
  CONVEYOR_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<uint8_t> bytes(n * dtype_size(dt));
  CONVEYOR_CUDA_CHECK(cudaMemcpy(bytes.data(), src, bytes.size(), cudaMemcpyDeviceToHost));
  return decode(bytes, dt);
}

// FP8 codes (bytes) to and from the device.
inline std::vector<uint8_t> download_codes(const TestBuffer& b, size_t n) {
  std::vector<uint8_t> out(n);
  CONVEYOR_CUDA_CHECK(cudaMemcpy(out.data(), b.get(), n, cudaMemcpyDeviceToHost));
  return out;
}

inline TestBuffer upload_codes(const std::vector<uint8_t>& codes) {
  TestBuffer b(codes.size());
  CONVEYOR_CUDA_CHECK(cudaMemcpy(b.get(), codes.data(), codes.size(), cudaMemcpyHostToDevice));
  return b;
}

inline TestBuffer upload_ids(const std::vector<int32_t>& ids) {
  TestBuffer buf(ids.size() * sizeof(int32_t));
  CONVEYOR_CUDA_CHECK(cudaMemcpy(buf.get(), ids.data(), ids.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
  return buf;
}

// Tolerance for one final rounding to dt (half an ulp is 2^-9 for bf16, 2^-12 for f16) plus the
// extra rounding of an intermediate result that matches the framework's order, plus fp32 noise.
struct Tolerance {
  float atol;
  float rtol;
};
inline Tolerance tolerance_for(DType dt) {
  switch (dt) {
    case DType::kBF16: return {1e-3f, 1.6e-2f};
    case DType::kF16: return {1e-4f, 2e-3f};
    default: return {1e-5f, 1e-5f};
  }
}

// A matmul's output (GemmRunner, gemv): one final rounding to `out` (at most half an ulp of the exact
// fp32 sum) plus accumulation-order noise of fp32 sums, which grows like sqrt(k) (tensor cores, the
// k split of a block and split-K add in another order than the CPU twin).
inline Tolerance matmul_tolerance(DType out, int64_t k) {
  const float noise = 1e-4f + 2e-5f * std::sqrt(static_cast<float>(k));
  switch (out) {
    case DType::kBF16: return {1e-3f + noise, 8e-3f};
    case DType::kF16: return {noise, 1e-3f};
    default: return {noise, 1e-4f};
  }
}

}  // namespace conveyor::testing
