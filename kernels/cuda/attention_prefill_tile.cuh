// The pieces both prefill attention kernels share (attention_prefill.cu on mma.sync, attention_prefill_wgmma.cu
// on Hopper's warpgroup MMA): tiles of kKeys cached positions, FP8 tiles converted to the activation type as
// they load, the block-table lookups a tile ahead, each row's visible key range, the online softmax over
// one tile in the m16n8 accumulator layout (both kernels' S and O use it) and the normalized output store.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/attention_device.cuh"
#include "runtime/core/cuda_check.h"
#include "runtime/core/error.h"

namespace conveyor::cuda_detail::prefill {

constexpr int kKeys = 64;  // cached positions per K/V tile

// Two fp32 values as one register of two 16-bit elements, lo in the low half (the smaller index).
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  const T a = Elem<T>::from_float(lo), b = Elem<T>::from_float(hi);
  return static_cast<uint32_t>(reinterpret_cast<const uint16_t&>(a)) |
         (static_cast<uint32_t>(reinterpret_cast<const uint16_t&>(b)) << 16);
}

// 8 e4m3 codes (lo: the first 4) as 8 T values in one 16-byte vector, exactly.
template <typename T>
__device__ __forceinline__ uint4 codes8_as(uint32_t lo, uint32_t hi) {
  float f[8];
  unpack8<Fp8Kv>(make_uint4(lo, hi, 0u, 0u), f);
  return make_uint4(pack2<T>(f[0], f[1]), pack2<T>(f[2], f[3]), pack2<T>(f[4], f[5]), pack2<T>(f[6], f[7]));
}

// 8 cache elements of type KV at p as 8 T values in one 16-byte vector: a 16-bit cache's as they are,
// an FP8 cache's 8 codes converted (exactly) to T.
template <typename T, typename KV>
__device__ __forceinline__ uint4 load8_as(const KV* p) {
  if constexpr (sizeof(KV) == 1) {
    const uint2 raw = __ldg(reinterpret_cast<const uint2*>(p));
    return codes8_as<T>(raw.x, raw.y);
  } else {
    return __ldg(reinterpret_cast<const uint4*>(p));
  }
}

// The block-table entry of position p (-1: past `last` or past the table): read a tile ahead of the copies
// that need it, by the CTA's first kKeys threads, one position each.
__device__ __forceinline__ int table_entry(const int32_t* table, const PagedAttentionArgs& a, int p, int last) {
  const int idx = p / a.block_size;
  return p <= last && idx < a.max_blocks ? __ldg(table + idx) : -1;
}

// The element offset of position p (kv head 0) in the pool for its table entry, -1 for none.
__device__ __forceinline__ long long row_offset(const PagedAttentionArgs& a, int block, int p, int head_dim) {
  return block_row(block, p, a.block_size, a.num_blocks, static_cast<long long>(a.n_kv_heads) * head_dim);
}

// The CTA's place in prefill_grid: query head, sequence, its chunk (first token, length) and its first
// row (the last row tiles first: they have the most keys).
struct CtaTile {
  int head, kvh, seq, q0, qlen, row0;
  // False when the CTA has nothing to do (a decode, for the decode kernel; rows past the chunk), which is
  // uniform over the CTA.
  __device__ __forceinline__ bool locate(const PagedAttentionArgs& a, int rows) {
    head = blockIdx.x, seq = blockIdx.z, kvh = head / a.group;
    q0 = __ldg(a.query_start + seq);
    qlen = __ldg(a.query_start + seq + 1) - q0;
    row0 = (gridDim.y - 1 - blockIdx.y) * rows;
    return qlen > 1 && row0 < qlen;
  }
};

// Key ranges of one CTA: each lane's rows (g and g + 8 of each of its warp's kMt m-tiles) see [lo, pos];
// the CTA loads tiles over the union, a warp (a warpgroup in the wgmma kernel) computes only on tiles
// that touch its own rows.
template <int kMt>
struct RowRanges {
  int pos[kMt][2];              // pos -1: row past the end of the sequence's chunk; a row sees [lo(pos), pos]
  int window;
  __device__ __forceinline__ int lo(int p) const { return window > 0 ? max(0, p - window + 1) : 0; }
  int cta_first, cta_last;      // union over the CTA
  int warp_first, warp_last;    // union over the warp
  int whole_first, whole_last;  // keys every row of the warp sees (empty when a row is past the chunk)
};

template <int kMt>
__device__ __forceinline__ RowRanges<kMt> row_ranges(const PagedAttentionArgs& a, int q0, int qlen, int first_row) {
  __shared__ int range_s[2];
  RowRanges<kMt> r;
  const int g = (threadIdx.x % 32) / 4;
  r.window = a.window;
  if (threadIdx.x == 0) {
    range_s[0] = 0x7fffffff;
    range_s[1] = -1;
  }
  __syncthreads();
  r.warp_first = 0x7fffffff;
  r.warp_last = -1;
  r.whole_first = 0;
  r.whole_last = 0x7fffffff;
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int row = first_row + 16 * mt + g + 8 * i;
      const int pos = row < qlen ? __ldg(a.positions + q0 + row) : -1;
      r.pos[mt][i] = pos;
      const int lo = r.lo(pos);
      r.whole_first = max(r.whole_first, lo);
      r.whole_last = min(r.whole_last, pos);  // -1 for a row past the chunk: no whole tile
      if (pos < 0) continue;
      atomicMin(&range_s[0], lo);
      atomicMax(&range_s[1], pos);
      r.warp_first = min(r.warp_first, lo);
      r.warp_last = max(r.warp_last, pos);
    }
#pragma unroll
  for (int o = 16; o > 0; o /= 2) {
    r.warp_first = min(r.warp_first, __shfl_xor_sync(0xffffffffu, r.warp_first, o));
    r.warp_last = max(r.warp_last, __shfl_xor_sync(0xffffffffu, r.warp_last, o));
    r.whole_first = max(r.whole_first, __shfl_xor_sync(0xffffffffu, r.whole_first, o));
    r.whole_last = min(r.whole_last, __shfl_xor_sync(0xffffffffu, r.whole_last, o));
  }
  __syncthreads();
  r.cta_first = range_s[0];
  r.cta_last = range_s[1];
  return r;
}

// Masks the keys a row does not see in one m-tile's raw scores (m-tile mt of the lane's RowRanges) to -inf;
// the scale is applied in softmax_probs. Accumulator e of chunk n: row g + 8 (e >> 1), key k0 + 8 n + 2 tq +
// (e & 1): visible when lo <= 8 n + (e & 1) <= hi, the row's bounds taken relative to the lane's first key.
template <int kMt>
__device__ __forceinline__ void mask_scores(float (&s)[kKeys / 8][4], const RowRanges<kMt>& r, int mt, int k0) {
  const int first = k0 + 2 * (threadIdx.x % 4);
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int pos = r.pos[mt][i];
    const int hi = pos - first, lo = r.lo(pos) - first;  // pos -1 (a row past the chunk): hi < 0, nothing seen
#pragma unroll
    for (int n = 0; n < kKeys / 8; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int off = 8 * n + e;
        if (off < lo || off > hi) s[n][2 * i + e] = kNegInf;
      }
  }
}

// The online softmax's first half over one tile for one m-tile, from raw scores (masked to -inf where not
// seen): new row maxima in log2 units (scores times scale_log2; shared by the 4 lanes of a row), s turned into
// probabilities, each one FMA and one MUFU.EX2, the partial sums rescaled and extended; alpha: the factor by
// which the rows' earlier O must be scaled (softmax_rescale). Split from it so that a product still writing O
// can run while this half does.
__device__ __forceinline__ void softmax_probs(float (&s)[kKeys / 8][4], float (&m)[2], float (&l)[2],
                                              float (&alpha)[2], float scale_log2) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float mx = kNegInf;
#pragma unroll
    for (int n = 0; n < kKeys / 8; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * i], s[n][2 * i + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    mx = fmaxf(m[i], mx * scale_log2);  // scale_log2 > 0: the maximum of the scaled scores
    const float safe = mx == kNegInf ? 0.f : mx;  // nothing visible yet: keep everything at zero
    alpha[i] = fast_exp2(m[i] - safe);
    m[i] = mx;
    float sum = 0.f;
#pragma unroll
    for (int n = 0; n < kKeys / 8; ++n) {
      s[n][2 * i] = fast_exp2(fmaf(s[n][2 * i], scale_log2, -safe));
      s[n][2 * i + 1] = fast_exp2(fmaf(s[n][2 * i + 1], scale_log2, -safe));
      sum += s[n][2 * i] + s[n][2 * i + 1];
    }
    l[i] = l[i] * alpha[i] + sum;
  }
}

template <int D>
__device__ __forceinline__ void softmax_rescale(float (&o)[D / 8][4], const float (&alpha)[2]) {
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    o[n][0] *= alpha[0];
    o[n][1] *= alpha[0];
    o[n][2] *= alpha[1];
    o[n][3] *= alpha[1];
  }
}

// Online softmax over one tile for one m-tile: both halves.
template <int D>
__device__ __forceinline__ void softmax_update(float (&s)[kKeys / 8][4], float (&o)[D / 8][4], float (&m)[2],
                                               float (&l)[2], float scale_log2) {
  float alpha[2];
  softmax_probs(s, m, l, alpha, scale_log2);
  softmax_rescale<D>(o, alpha);
}

// Writes one m16 tile's rows (g and g + 8 of the warp's 16 rows from row `first`): O over the row sums
// (summed over the 4 lanes of a row here) times v_scale, skipping rows past the chunk.
template <typename T, int D>
__device__ __forceinline__ void store_rows(const PagedAttentionArgs& a, const float (&o)[D / 8][4], const float (&l)[2],
                                           const int (&pos)[2], long long first, int head) {
  const int g = (threadIdx.x % 32) / 4, tq = threadIdx.x % 4;
  uint16_t* outp = static_cast<uint16_t*>(a.out);
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float sum = l[i];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    if (pos[i] < 0) continue;
    const float inv = (sum > 0.f ? 1.f / sum : 0.f) * a.v_scale;  // v_scale: 1 unless the cache is FP8
    const long long base = ((first + g + 8 * i) * a.n_heads + head) * D;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      *reinterpret_cast<uint32_t*>(outp + base + n * 8 + 2 * tq) = pack2<T>(o[n][2 * i] * inv, o[n][2 * i + 1] * inv);
    }
  }
}

// The grid of a prefill launch: query heads fastest, then row tiles of `rows`, then sequences.
inline dim3 prefill_grid(const PagedAttentionArgs& a, int max_query_len, int rows) {
  const int tiles = (max_query_len + rows - 1) / rows;
  CONVEYOR_CHECK(a.num_seqs <= 65535 && tiles <= 65535, "prefill attention: grid too large (", a.num_seqs,
                 " sequences, ", max_query_len, " query rows)");
  return dim3(a.n_heads, tiles, a.num_seqs);
}

// Launches Kernel's instantiation for <T, KV, D> (Kernel: kBlock threads, smem<KV, D>() bytes of dynamic shared
// memory, fn<T, KV, D>() the __global__ function), the shared memory allowed once per process.
template <typename Kernel>
struct Launch {
  const PagedAttentionArgs& a;
  dim3 grid;
  cudaStream_t s;
  template <typename T, typename KV, int D>
  void run() {
    const auto fn = Kernel::template fn<T, KV, D>();
    static const cudaError_t allowed =
        cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, Kernel::template smem<KV, D>());
    CONVEYOR_CUDA_CHECK(allowed);
    fn<<<grid, Kernel::kBlock, Kernel::template smem<KV, D>(), s>>>(a);
    CONVEYOR_CUDA_CHECK(cudaGetLastError());
  }
};

// Calls launch.template run<T, KV, D>() for the activation dtype dt (bf16 or f16), the cache (that type,
// or FP8 when a.kv_fp8) and a.head_dim (64 or 128).
template <typename T, typename KV, typename L>
void dispatch_head_dim(const PagedAttentionArgs& a, L& launch) {
  if (a.head_dim == 64) {
    launch.template run<T, KV, 64>();
  } else {
    launch.template run<T, KV, 128>();
  }
}
template <typename L>
void dispatch(const PagedAttentionArgs& a, DType dt, L& launch) {
  if (dt == DType::kBF16) {
    if (a.kv_fp8) dispatch_head_dim<__nv_bfloat16, Fp8Kv>(a, launch);
    else dispatch_head_dim<__nv_bfloat16, __nv_bfloat16>(a, launch);
  } else {
    if (a.kv_fp8) dispatch_head_dim<__half, Fp8Kv>(a, launch);
    else dispatch_head_dim<__half, __half>(a, launch);
  }
}

}  // namespace conveyor::cuda_detail::prefill
