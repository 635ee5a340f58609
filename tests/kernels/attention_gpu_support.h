// Device buffers (CudaBuffer) and 16-bit conversions for the kernel GPU tests: inputs are rounded to the
// storage dtype on the host first, so the fp32 CPU twin sees exactly what the GPU sees.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/attention.h"
#include "kernels/dtype.h"
#include "runtime/core/cuda_buffer.h"
#include "tests/kernels/paged_layout.h"

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

// One attention test case: heads, head size, block size, window and the sequences of the batch.
struct AttentionCase {
  std::string name;
  int n_heads, n_kv_heads, head_dim, block_size, window;
  std::vector<std::pair<int, int>> seqs;  // (cached history, new tokens) per sequence
  // > 1: the host passes max_context_len * context_bound as its bound and the exact value in device
  // memory (the CUDA-graph path: grid sized for the bound, splits from the exact value).
  int context_bound = 1;
};

// Contexts 1, 33, 1000, 5000 for decodes; chunks of 7 and 100 tokens after various histories.
inline const std::vector<std::pair<int, int>> kMixedSeqs = {{0, 1},  {32, 1},  {999, 1}, {4999, 1}, {0, 7},
                                                            {26, 7}, {993, 7}, {0, 100}, {900, 100}};
inline const std::vector<std::pair<int, int>> kDecodeSeqs = {{0, 1},    {32, 1},    {999, 1},
                                                             {4999, 1}, {4000, 1}, {77, 1}};

// The prefill kernels to hold to the twin on this GPU: mma.sync everywhere, and the wgmma kernel on an
// sm_90 GPU (H100, H200), where the build must carry it (forcing it throws otherwise, which fails the test).
inline std::vector<PrefillAttentionKernel> prefill_kernels_to_test() {
  int dev = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) return {};
  if (prop.major == 9 && prop.minor == 0) return {PrefillAttentionKernel::kMmaSync, PrefillAttentionKernel::kWgmma};
  return {PrefillAttentionKernel::kMmaSync};
}

// Runs `run` once per kernel of prefill_kernels_to_test(), each forced (and named in a trace), then goes
// back to the automatic choice.
template <typename F>
void for_each_prefill_kernel(F run) {
  for (PrefillAttentionKernel k : prefill_kernels_to_test()) {
    set_prefill_attention_kernel(k);
    ::testing::ScopedTrace trace(__FILE__, __LINE__, std::string("prefill kernel ") + prefill_attention_kernel_name());
    run();
  }
  set_prefill_attention_kernel(PrefillAttentionKernel::kAuto);
}

}  // namespace conveyor::testing
