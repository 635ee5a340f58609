// Device buffers (CudaBuffer) and 16-bit conversions for the kernel GPU tests: inputs are rounded to the
// storage dtype on the host first, so the fp32 CPU twin sees exactly what the GPU sees.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/attention.h"
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

// The host side of a batch's paging: block tables over a shuffled pool (5 spare blocks) with one spare
// -1 entry per sequence, positions and query starts.
struct PagedLayout {
  PagedKvShape shape;
  std::vector<int32_t> query_start{0}, positions, tables;
  int max_blocks = 0, max_query_len = 0, max_context_len = 0;
  AttentionBatch batch() const {
    AttentionBatch b;
    b.num_seqs = static_cast<int>(query_start.size()) - 1;
    b.query_start = query_start.data();
    b.positions = positions.data();
    b.block_tables = tables.data();
    b.max_blocks_per_seq = max_blocks;
    return b;
  }
};

inline PagedLayout lay_out(const AttentionCase& c, std::mt19937_64& rng) {
  PagedLayout h;
  int total_blocks = 0;
  for (auto [hist, fresh] : c.seqs) {
    const int blocks = (hist + fresh + c.block_size - 1) / c.block_size;
    total_blocks += blocks;
    h.max_blocks = std::max(h.max_blocks, blocks + 1);  // one spare entry stays -1
    h.max_query_len = std::max(h.max_query_len, fresh);
    h.max_context_len = std::max(h.max_context_len, hist + fresh);
  }
  h.shape = PagedKvShape{total_blocks + 5, c.block_size, c.n_kv_heads, c.head_dim};
  std::vector<int32_t> ids(h.shape.num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  size_t next = 0;
  for (auto [hist, fresh] : c.seqs) {
    const int blocks = (hist + fresh + c.block_size - 1) / c.block_size;
    for (int i = 0; i < h.max_blocks; ++i) h.tables.push_back(i < blocks ? ids[next++] : -1);
    for (int p = hist; p < hist + fresh; ++p) h.positions.push_back(p);
    h.query_start.push_back(h.query_start.back() + fresh);
  }
  return h;
}

}  // namespace conveyor::testing
