// Device helpers shared by the attention and rope kernels (CUDA only; not part of any public API):
// element conversions for the three storage types and FP8 KV codes, 16-byte vector unpacking, the
// warp-wide search for a token's sequence and the paged-cache address of (sequence, position).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/e4m3.cuh"

namespace conveyor::cuda_detail {

template <typename T>
struct Elem;
template <>
struct Elem<float> {
  static __device__ __forceinline__ float to_float(float x) { return x; }
  static __device__ __forceinline__ float from_float(float x) { return x; }
};
template <>
struct Elem<__nv_bfloat16> {
  static __device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
  static __device__ __forceinline__ __nv_bfloat16 from_float(float x) { return __float2bfloat16_rn(x); }
};
template <>
struct Elem<__half> {
  static __device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
  static __device__ __forceinline__ __half from_float(float x) { return __float2half_rn(x); }
};

// 8 16-bit elements held in one 16-byte vector, to fp32.
template <typename T>
__device__ __forceinline__ void unpack8(const uint4& v, float* f) {
  const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
  for (int i = 0; i < 8; ++i) f[i] = Elem<T>::to_float(e[i]);
}

// An FP8 KV cache's element type (--kv-cache-dtype fp8): kernels templated on the cache element take
// their one-byte paths for it.
using Fp8Kv = __nv_fp8_e4m3;

// 8 e4m3 codes (the low 8 bytes of v) to fp32, exactly: pairs through the hardware conversion to half
// (e4m3.cuh: cvt.rn.f16x2.e4m3x2 on sm_89+; every e4m3 value, NaN included, is a half).
template <>
__device__ __forceinline__ void unpack8<Fp8Kv>(const uint4& v, float* f) {
  const uint32_t w[2] = {v.x, v.y};
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    uint32_t h[2];
    e4m3x4_to_f16x2x2(w[j], h[0], h[1]);
#pragma unroll
    for (int p = 0; p < 2; ++p) {
      const float2 x = __half22float2(reinterpret_cast<const __half2&>(h[p]));
      f[4 * j + 2 * p] = x.x;
      f[4 * j + 2 * p + 1] = x.y;
    }
  }
}

// The e4m3 code of x / scale exactly as the CPU twin (kernels/cpu/fp8.h) makes it: IEEE division, round
// to nearest even, +-448 on overflow (satfinite), NaN -> 0x7f.
__device__ __forceinline__ uint8_t fp8_kv_code(float x, float scale) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(__fdiv_rn(x, scale), __NV_SATFINITE, __NV_E4M3));
}

// Stores x into a cache element of type KV: the activation dtype as it is, an FP8 cache as the code of
// x / scale.
template <typename KV>
__device__ __forceinline__ void store_kv(KV* p, float x, float scale) {
  (void)scale;
  *p = Elem<KV>::from_float(x);
}
template <>
__device__ __forceinline__ void store_kv<Fp8Kv>(Fp8Kv* p, float x, float scale) {
  *reinterpret_cast<uint8_t*>(p) = fp8_kv_code(x, scale);
}

// The sequence s with query_start[s] <= t < query_start[s + 1] (the last such s when some
// sequences are empty). Every lane of the warp must call it; each step reads 32 evenly spaced
// entries and keeps the segment that holds t, so 1024 sequences take two dependent reads.
__device__ __forceinline__ int find_seq(const int32_t* query_start, int num_seqs, int t) {
  const int lane = threadIdx.x & 31;
  int lo = 0, hi = num_seqs - 1;  // invariant: query_start[lo] <= t, answer in [lo, hi]
  while (lo < hi) {
    const int step = (hi - lo + 32) / 32;  // ceil((hi - lo + 1) / 32)
    const int idx = lo + lane * step;
    const bool ok = idx <= hi && __ldg(query_start + idx) <= t;
    const unsigned mask = __ballot_sync(0xffffffffu, ok);
    const int last = 31 - __clz(static_cast<int>(mask));  // lane 0 is always ok
    const int new_lo = lo + last * step;
    hi = min(hi, new_lo + step - 1);
    lo = new_lo;
  }
  return lo;
}

// Element offset of (position, kv head 0) in one layer's pool, or -1 when the block table does not
// cover the position or names a block outside the pool (block_row: the same for a block already looked up).
__device__ __forceinline__ long long block_row(int block, int pos, int block_size, int num_blocks,
                                               long long token_elems) {
  if (block < 0 || block >= num_blocks) return -1;
  return (static_cast<long long>(block) * block_size + pos % block_size) * token_elems;
}
__device__ __forceinline__ long long cache_row(const int32_t* table, int max_blocks, int pos, int block_size,
                                               int num_blocks, long long token_elems) {
  const int idx = pos / block_size;
  if (pos < 0 || idx >= max_blocks) return -1;
  return block_row(__ldg(table + idx), pos, block_size, num_blocks, token_elems);
}

// Division of 0 <= n < 2^31 by a run-time divisor 1 <= d < 2^31 with one multiply-high instead of the
// ~20-instruction integer division (Granlund-Montgomery): s = ceil(log2 d), m = 2^32 (2^s - d) / d + 1
// (< 2^32), n / d = (umulhi(n, m) + n) >> s; the sum stays below 2^32 because umulhi(n, m) < n.
struct FastDiv {
  unsigned m = 1;
  int s = 0;
  FastDiv() = default;
  explicit FastDiv(int d) {
    while ((1LL << s) < d) ++s;
    m = static_cast<unsigned>(((1ULL << 32) * ((1ULL << s) - static_cast<unsigned long long>(d))) /
                                  static_cast<unsigned long long>(d) + 1);
  }
  __device__ __forceinline__ int div(int n) const {
    const unsigned u = static_cast<unsigned>(n);
    return static_cast<int>((__umulhi(u, m) + u) >> s);
  }
};

// 2^x in one MUFU.EX2 (exp2f adds range fix-ups around it); ~2 ulp, 2^-inf = +0, denormals flushed,
// which the softmax weights can afford.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// 16-byte global -> shared copies that do not pass through registers (cp.async, sm_80+), so a thread
// can keep several stages of loads in flight. valid == false writes zeros and reads nothing. Older
// architectures take a plain load and store (same result, no overlap).
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(valid ? 16 : 0)
               : "memory");
#else
  *static_cast<uint4*>(smem) = valid ? __ldg(static_cast<const uint4*>(gmem)) : make_uint4(0, 0, 0, 0);
#endif
}

// The same for 8 bytes (an FP8 row piece), through L1 (cp.async.cg takes 16 bytes only).
__device__ __forceinline__ void cp_async8(void* smem, const void* gmem, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst), "l"(gmem), "r"(valid ? 8 : 0)
               : "memory");
#else
  *static_cast<uint2*>(smem) = valid ? __ldg(static_cast<const uint2*>(gmem)) : make_uint2(0, 0);
#endif
}

// Copies one lane's 8 cache elements of type KV (16 bytes of a 16-bit cache, 8 of an FP8 one).
template <typename KV>
__device__ __forceinline__ void cp_async_row8(void* smem, const KV* gmem, bool valid) {
  if constexpr (sizeof(KV) == 1) {
    cp_async8(smem, gmem, valid);
  } else {
    cp_async16(smem, gmem, valid);
  }
}

// Closes the group of copies issued since the last commit.
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Waits until at most kPending of this thread's committed groups are still in flight; the data of
// the others is then visible to this thread (and to others only after a barrier).
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
}

}  // namespace conveyor::cuda_detail

#include "kernels/cuda/attention.h"
#include "kernels/dtype.h"

namespace conveyor::cuda_detail {

// Throws, naming `who`, unless an FP8 format's scales are finite and > 0 (kv_write.cu).
void check_kv_format(const KvCacheFormat& kv, const char* who);

constexpr float kNegInf = -__builtin_huge_valf();

// Everything one paged-attention launch needs, resolved on the host. Scores are kept in the log2
// domain (q.k * scale * log2 e) so the kernels use exp2f.
struct PagedAttentionArgs {
  void* out = nullptr;             // [num_tokens, n_heads, head_dim]
  const void* q = nullptr;         // [num_tokens, n_heads, head_dim]
  const void* k_cache = nullptr;   // [num_blocks, block_size, n_kv_heads, head_dim]
  const void* v_cache = nullptr;   // [num_blocks, block_size, n_kv_heads, head_dim]
  float* part_o = nullptr;         // [num_tokens, n_heads, splits, head_dim] normalized split outputs
  float2* part_ml = nullptr;       // [num_tokens, n_heads, splits] (max, sum) of each split
  const int32_t* query_start = nullptr;
  const int32_t* positions = nullptr;
  const int32_t* block_tables = nullptr;
  int num_seqs = 0, num_tokens = 0, max_blocks = 0, num_blocks = 0, block_size = 0;
  FastDiv block_div;   // by block_size
  int n_heads = 0, n_kv_heads = 0, group = 0, head_dim = 0;
  int window = 0;
  float scale_log2 = 0.f;
  int splits = 1;      // context splits the decode grid is sized for (an upper bound when max_context is set)
  // Optional [1] device int: the batch's exact max context; the kernels then derive the splits in use
  // from it (<= splits; CTAs of higher splits exit), so a CUDA graph serves steps of any context.
  const int32_t* max_context = nullptr;
  int chunks = 1;      // query-head chunks per KV head in the decode kernel
  int skip_multi = 0;  // 1: the decode kernel leaves sequences with > 1 new token to the prefill kernel
  // FP8 KV cache (--kv-cache-dtype fp8): k_cache/v_cache hold e4m3 bytes and a cached element is
  // e4m3 * k_scale (v_scale); 0: the caches hold the activation dtype and the scales are unused.
  // k_scale is folded into scale_log2 on the host; the kernels multiply their outputs by v_scale
  // (1 for a 16-bit cache, so nothing changes there).
  int kv_fp8 = 0;
  float k_scale = 1.f, v_scale = 1.f;
  // The decode grid's order (decode_grid, decode_cta): 0, token-major (blockIdx.x the token); 1, a token's KV
  // heads adjacent in launch order (blockIdx.x the head chunk), so the CTAs resident together read whole cache
  // rows (all KV heads of a position, n_kv_heads x head_dim contiguous) rather than one head's slice of many.
  int heads_first = 0;
};

// The decode kernels' grid: (tokens, n_kv_heads x chunks, splits), or with heads_first the first two swapped.
inline dim3 decode_grid(const PagedAttentionArgs& a) {
  const auto tokens = static_cast<unsigned>(a.num_tokens), chunks = static_cast<unsigned>(a.n_kv_heads * a.chunks);
  const auto splits = static_cast<unsigned>(a.splits);
  return a.heads_first ? dim3(chunks, tokens, splits) : dim3(tokens, chunks, splits);
}

// A decode CTA's token (.x) and head chunk (.y, of n_kv_heads x chunks): decode_grid's inverse.
__device__ __forceinline__ int2 decode_cta(const PagedAttentionArgs& a) {
  return a.heads_first ? make_int2(blockIdx.y, blockIdx.x) : make_int2(blockIdx.x, blockIdx.y);
}

constexpr int kMinPartition = 64;        // fewest positions worth a split of their own
// (token, head) rows x splits per launch; bounds the workspace. Measured on H200 (batch 16/64, 32 heads,
// 1k-16k context): 4096 beat 8192 and 16384 (fewer, longer splits; 16384 was 2-15% slower).
constexpr long long kTargetRows = 4096;

// Splits of the decode kernels: enough CTAs to fill the GPU, no split shorter than kMinPartition.
// Host and device: with a device max_context the kernels recompute it from the exact value.
__host__ __device__ inline int decode_splits(int num_tokens, int n_heads, int max_context_len) {
  const int c = max_context_len > kMinPartition ? (max_context_len + kMinPartition - 1) / kMinPartition : 1;
  const long long rows = static_cast<long long>(num_tokens) * n_heads;
  if (c <= 1 || rows >= kTargetRows) return 1;
  const long long cap = kTargetRows / rows;
  return static_cast<int>(c < cap ? c : cap);
}

// The splits a decode launch uses: exact from device memory when given (never above the grid's).
__device__ __forceinline__ int decode_live_splits(const PagedAttentionArgs& a) {
  if (a.max_context == nullptr) return a.splits;
  const int s = decode_splits(a.num_tokens, a.n_heads, __ldg(a.max_context));
  return s < a.splits ? s : a.splits;
}

// The (token, head) rows and context range one decode CTA owns (both decode kernels).
struct DecodeWork {
  int seq, pos, begin, end;  // positions [begin, end) of this split
  int splits;                // splits in use (decode_live_splits)
  bool skip;
};

__device__ __forceinline__ DecodeWork decode_work(const PagedAttentionArgs& a, int t, int split) {
  DecodeWork w;
  w.seq = find_seq(a.query_start, a.num_seqs, t);
  w.splits = decode_live_splits(a);
  w.skip = split >= w.splits ||
           (a.skip_multi && __ldg(a.query_start + w.seq + 1) - __ldg(a.query_start + w.seq) > 1);
  w.pos = __ldg(a.positions + t);
  const int lo = a.window > 0 ? max(0, w.pos - a.window + 1) : 0;
  const int len = w.pos - lo + 1;
  const int part = (len + w.splits - 1) / w.splits;
  w.begin = lo + split * part;
  w.end = min(w.begin + part, w.pos + 1);
  return w;
}

// Merges the n partial softmax states a decode CTA holds for element d of (token, head) row `row`: ml(j) its
// (max, sum) in the log2 domain, acc(j) its unnormalized output. Writes the output (one split) or the split's
// normalized partial and, at d == 0, its (max, sum), for decode_reduce_kernel.
template <typename T, int D, typename Ml, typename Acc>
__device__ __forceinline__ void merge_store(const PagedAttentionArgs& a, long long row, int d, int splits, int n,
                                            Ml&& ml, Acc&& acc) {
  float mx = kNegInf;
  for (int j = 0; j < n; ++j) mx = fmaxf(mx, ml(j).x);
  const float safe = mx == kNegInf ? 0.f : mx;
  float sum = 0.f, o = 0.f;
  for (int j = 0; j < n; ++j) {
    const float wgt = exp2f(ml(j).x - safe);
    sum += wgt * ml(j).y;
    o += wgt * acc(j);
  }
  const float val = (sum > 0.f ? o / sum : 0.f) * a.v_scale;  // v_scale: 1 unless the cache is FP8
  if (splits == 1) {
    static_cast<T*>(a.out)[row * D + d] = Elem<T>::from_float(val);
  } else {
    const long long prow = row * splits + blockIdx.z;
    a.part_o[prow * D + d] = val;
    if (d == 0) a.part_ml[prow] = make_float2(mx, sum);
  }
}

// The decode kernel over an FP8 cache on tensor cores (attention_decode_mma.cu), head_dim 64 and 128: grid
// (num_tokens, n_kv_heads * chunks, splits) with 8 query heads per chunk; the caller merges the splits.
bool decode_mma_supports(int head_dim);
void launch_decode_mma(const PagedAttentionArgs& a, DType dt, cudaStream_t s);

// The flash-attention tile kernel for sequences with more than one new token (attention_prefill.cu);
// an FP8 cache (a.kv_fp8) is converted to dt exactly as its tiles are loaded.
// It runs on Hopper's warpgroup MMA where the GPU is sm_90 and the build has sm_90a code
// (attention_prefill_wgmma.cu), else on mma.sync; set_prefill_attention_kernel (attention.h) forces one.
bool prefill_kernel_supports(int head_dim);
void launch_prefill_attention(const PagedAttentionArgs& a, int max_query_len, DType dt, cudaStream_t s);
bool wgmma_prefill_built();  // the current device runs the sm_90a code (a synchronous query: not while capturing)
void launch_wgmma_prefill(const PagedAttentionArgs& a, int max_query_len, DType dt, cudaStream_t s);

}  // namespace conveyor::cuda_detail
