// RoPE kernels (see rope.h). rope_kernel: one CTA per token; the token's cos/sin table goes to shared
// memory once and serves every head, so sincosf runs head_dim/2 times per token, not per head. The fused variant
// reads a q|k|v projection row, finds the token's sequence (warp search over query_start) and writes
// k and v into the pool: as they are, or for an FP8 pool the codes of the fp32 values over their scale.
#include "kernels/cuda/rope.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>

#include "kernels/cuda/attention_device.cuh"
#include "kernels/cuda/pdl.cuh"
#include "runtime/core/cuda_check.h"
#include "runtime/core/error.h"

namespace conveyor {
namespace {

using cuda_detail::Elem;
using cuda_detail::Fp8Kv;

constexpr int kThreads = 128;
constexpr int kMaxHalf = 512;  // head_dim <= 1024, as rope_ref

// Fills cos_s/sin_s [half] for one position; the caller syncs.
__device__ void fill_sincos(int pos, const float* inv_freq, int half, float* cos_s, float* sin_s) {
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    const float angle = static_cast<float>(pos) * __ldg(inv_freq + i);  // fp32 product, as rope_ref
    sincosf(angle, sin_s + i, cos_s + i);
  }
}

// dst[h, :] = rotate_half(src[h, :]) for heads rows of head_dim; src may equal dst (each pair is read
// and written by the same thread). D: the destination's element (an FP8 cache stores codes of x / scale).
template <typename T, typename D = T>
__device__ void rotate_rows(D* dst, const T* src, int heads, int half, const float* cos_s, const float* sin_s,
                            float scale = 1.f) {
  const int head_dim = 2 * half;
  for (int i = threadIdx.x; i < heads * half; i += blockDim.x) {
    const int h = i / half, j = i % half;
    const long long base = static_cast<long long>(h) * head_dim;
    const float x1 = Elem<T>::to_float(src[base + j]);
    const float x2 = Elem<T>::to_float(src[base + j + half]);
    cuda_detail::store_kv(dst + base + j, x1 * cos_s[j] - x2 * sin_s[j], scale);
    cuda_detail::store_kv(dst + base + j + half, x2 * cos_s[j] + x1 * sin_s[j], scale);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    rope_kernel(T* q, T* k, const int32_t* positions, const float* inv_freq, int n_heads, int n_kv_heads, int half) {
  __shared__ float cos_s[kMaxHalf], sin_s[kMaxHalf];
  const long long t = blockIdx.x;
  fill_sincos(__ldg(positions + t), inv_freq, half, cos_s, sin_s);
  __syncthreads();
  T* qt = q + t * n_heads * 2 * half;
  T* kt = k + t * n_kv_heads * 2 * half;
  rotate_rows(qt, qt, n_heads, half, cos_s, sin_s);
  rotate_rows(kt, kt, n_kv_heads, half, cos_s, sin_s);
}

// One fused projection row per token: qkv[t] = q | k | v. Rotated q goes to q_out, rotated k and plain v
// into the pools at the token's cache row. blockIdx.y picks a group of heads_per_cta heads counted over
// q heads then KV heads, so a decode step of a few tokens still spreads over many SMs (one CTA per
// token took ~15 us at batch 1); each CTA computes its token's cos/sin table itself (head_dim / 2
// sincosf, cheap next to the rows it moves). KV: the pools' element (T, or Fp8Kv with k_scale/v_scale).
template <typename T, typename KV>
__global__ void __launch_bounds__(kThreads)
    rope_qkv_write_kv_kernel(T* q_out, const T* qkv, KV* k_cache, KV* v_cache, const float* inv_freq,
                             const int32_t* query_start, const int32_t* positions, const int32_t* block_tables,
                             int num_seqs, int max_blocks, int num_blocks, int block_size, int n_heads,
                             int n_kv_heads, int half, int heads_per_cta, float k_scale, float v_scale) {
  cuda_detail::pdl_wait();               // pdl.cuh: this kernel reads the one before ...
  cuda_detail::pdl_launch_dependents();  // ... and the next may be placed now
  __shared__ float cos_s[kMaxHalf], sin_s[kMaxHalf];
  __shared__ long long row_s;
  const int t = blockIdx.x;
  const int first = blockIdx.y * heads_per_cta;
  const int last = min(first + heads_per_cta, n_heads + n_kv_heads);
  const int pos = __ldg(positions + t);
  const int head_dim = 2 * half;
  const long long q_cols = static_cast<long long>(n_heads) * head_dim;
  const long long token_elems = static_cast<long long>(n_kv_heads) * head_dim;
  const T* q_in = qkv + t * (q_cols + 2 * token_elems);
  const T* k_in = q_in + q_cols;
  const T* v_in = k_in + token_elems;
  const bool writes_kv = last > n_heads;
  if (writes_kv && threadIdx.x < 32) {
    const int seq = cuda_detail::find_seq(query_start, num_seqs, t);
    if (threadIdx.x == 0) {
      row_s = cuda_detail::cache_row(block_tables + static_cast<long long>(seq) * max_blocks, max_blocks, pos,
                                     block_size, num_blocks, token_elems);
    }
  }
  fill_sincos(pos, inv_freq, half, cos_s, sin_s);
  __syncthreads();
  if (first < n_heads) {
    const long long off = static_cast<long long>(first) * head_dim;
    rotate_rows(q_out + t * q_cols + off, q_in + off, min(last, n_heads) - first, half, cos_s, sin_s);
  }
  if (!writes_kv) return;
  const long long row = row_s;
  if (row < 0) return;
  const int k0 = max(first, n_heads) - n_heads, k1 = last - n_heads;
  const long long off = static_cast<long long>(k0) * head_dim;
  rotate_rows(k_cache + row + off, k_in + off, k1 - k0, half, cos_s, sin_s, k_scale);
  KV* dst = v_cache + row + off;
  const long long n = static_cast<long long>(k1 - k0) * head_dim;
  for (long long i = threadIdx.x; i < n; i += blockDim.x) {
    if constexpr (sizeof(KV) == 1) {
      cuda_detail::store_kv(dst + i, Elem<T>::to_float(v_in[off + i]), v_scale);
    } else {
      dst[i] = v_in[off + i];
    }
  }
}

// Heads per CTA of rope_qkv_write_kv_kernel: groups of 4 while the grid stays within ~16 CTAs per SM of a
// 132-SM H200, then the fewest heads that keep it there, up to all of a token's heads in one CTA. Round 19's
// ncu of a batch-256 FP8 step (H100) took the old rule's jump from 4 heads to all 40 at 256 tokens: 256 CTAs of
// 128 threads, 12.6 us for ~6 MB; with 5 heads a CTA the grid is 2,048 CTAs: 8.8 us in round 22's ncu (H100).
int heads_per_cta(int tokens, int heads) {
  constexpr int kSmallGroup = 4;
  constexpr long long kMaxCtas = 16 * 132;
  const long long groups = std::max(1LL, kMaxCtas / std::max(tokens, 1));
  return static_cast<int>(std::min<long long>(heads, std::max<long long>(kSmallGroup, (heads + groups - 1) / groups)));
}

void check_rope_dims(int head_dim, DType dt) {
  CONVEYOR_CHECK(head_dim > 0 && head_dim % 2 == 0 && head_dim <= 2 * kMaxHalf,
                 "rope_cuda: head_dim must be even and in (0, ", 2 * kMaxHalf, "], got ", head_dim);
  CONVEYOR_CHECK(dt == DType::kBF16 || dt == DType::kF16 || dt == DType::kF32,
                 "rope_cuda: dtype must be bf16, f16 or f32, got ", dtype_name(dt));
}

template <typename T>
void launch_rope(void* q, void* k, const int32_t* positions, const float* inv_freq, int tokens, int n_heads,
                 int n_kv_heads, int head_dim, cudaStream_t s) {
  rope_kernel<T><<<tokens, kThreads, 0, s>>>(static_cast<T*>(q), static_cast<T*>(k), positions, inv_freq, n_heads,
                                              n_kv_heads, head_dim / 2);
  CONVEYOR_CUDA_CHECK(cudaGetLastError());
}

template <typename T, typename KV>
void launch_rope_qkv_write_kv(void* q_out, const void* qkv, void* k_cache, void* v_cache, const float* inv_freq,
                              const AttentionBatchCuda& b, const PagedKvShape& shape, int n_heads, cudaStream_t s,
                              const KvScales& scales) {
  const int heads = n_heads + shape.n_kv_heads;
  const int per_cta = heads_per_cta(b.num_tokens, heads);
  const dim3 grid(static_cast<unsigned>(b.num_tokens), static_cast<unsigned>((heads + per_cta - 1) / per_cta));
  cuda_detail::launch_maybe_pdl(
      rope_qkv_write_kv_kernel<T, KV>, grid, dim3(kThreads), 0, s, static_cast<T*>(q_out), static_cast<const T*>(qkv),
      static_cast<KV*>(k_cache), static_cast<KV*>(v_cache), inv_freq, b.query_start, b.positions, b.block_tables, b.num_seqs, b.max_blocks_per_seq, shape.num_blocks,
      shape.block_size, n_heads, shape.n_kv_heads, shape.head_dim / 2, per_cta, scales.k, scales.v);
  CONVEYOR_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void rope_cuda(void* q, void* k, const int32_t* positions, const float* inv_freq, int tokens, int n_heads,
               int n_kv_heads, int head_dim, DType dt, cudaStream_t s) {
  CONVEYOR_CHECK(tokens >= 0 && n_heads > 0 && n_kv_heads > 0, "rope_cuda: bad shape tokens=", tokens,
                 " n_heads=", n_heads, " n_kv_heads=", n_kv_heads);
  check_rope_dims(head_dim, dt);
  if (tokens == 0) return;
  CONVEYOR_CHECK(q && k && positions && inv_freq, "rope_cuda: null pointer argument");
  switch (dt) {
    case DType::kBF16:
      return launch_rope<__nv_bfloat16>(q, k, positions, inv_freq, tokens, n_heads, n_kv_heads, head_dim, s);
    case DType::kF16:
      return launch_rope<__half>(q, k, positions, inv_freq, tokens, n_heads, n_kv_heads, head_dim, s);
    default:
      return launch_rope<float>(q, k, positions, inv_freq, tokens, n_heads, n_kv_heads, head_dim, s);
  }
}

void rope_qkv_write_kv_cuda(void* q_out, const void* qkv, void* k_cache, void* v_cache, const float* inv_freq,
                            const AttentionBatchCuda& b, const PagedKvShape& shape, int n_heads, DType dt,
                            cudaStream_t s, const KvCacheFormat& kv) {
  CONVEYOR_CHECK(b.num_tokens >= 0 && b.num_seqs >= 0 && n_heads > 0 && shape.n_kv_heads > 0 &&
                     shape.num_blocks > 0 && shape.block_size > 0,
                 "rope_qkv_write_kv_cuda: bad shape tokens=", b.num_tokens, " seqs=", b.num_seqs, " n_heads=", n_heads,
                 " n_kv_heads=", shape.n_kv_heads, " num_blocks=", shape.num_blocks, " block_size=", shape.block_size);
  check_rope_dims(shape.head_dim, dt);
  CONVEYOR_CHECK(!kv.fp8 || (std::isfinite(kv.scales.k) && kv.scales.k > 0.f && std::isfinite(kv.scales.v) &&
                             kv.scales.v > 0.f),
                 "rope_qkv_write_kv_cuda: an FP8 cache needs finite scales > 0, got k_scale ", kv.scales.k,
                 ", v_scale ", kv.scales.v);
  if (b.num_tokens == 0) return;
  CONVEYOR_CHECK(b.num_seqs > 0, "rope_qkv_write_kv_cuda: ", b.num_tokens, " tokens but no sequence");
  CONVEYOR_CHECK(q_out && qkv && k_cache && v_cache && inv_freq && b.query_start && b.positions && b.block_tables,
                 "rope_qkv_write_kv_cuda: null pointer argument");
  const KvScales& sc = kv.scales;
  switch (dt) {
    case DType::kBF16:
      if (kv.fp8)
        return launch_rope_qkv_write_kv<__nv_bfloat16, Fp8Kv>(q_out, qkv, k_cache, v_cache, inv_freq, b, shape,
                                                               n_heads, s, sc);
      return launch_rope_qkv_write_kv<__nv_bfloat16, __nv_bfloat16>(q_out, qkv, k_cache, v_cache, inv_freq, b, shape,
                                                                    n_heads, s, sc);
    case DType::kF16:
      if (kv.fp8)
        return launch_rope_qkv_write_kv<__half, Fp8Kv>(q_out, qkv, k_cache, v_cache, inv_freq, b, shape, n_heads, s,
                                                        sc);
      return launch_rope_qkv_write_kv<__half, __half>(q_out, qkv, k_cache, v_cache, inv_freq, b, shape, n_heads, s, sc);
    default:
      if (kv.fp8)
        return launch_rope_qkv_write_kv<float, Fp8Kv>(q_out, qkv, k_cache, v_cache, inv_freq, b, shape, n_heads, s, sc);
      return launch_rope_qkv_write_kv<float, float>(q_out, qkv, k_cache, v_cache, inv_freq, b, shape, n_heads, s, sc);
  }
}

}  // namespace conveyor
