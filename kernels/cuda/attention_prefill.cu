// Prefill-chunk attention on tensor cores (FlashAttention-2 style), for sequences with more than one
// new token. One CTA: 128 query rows of one sequence and one query head, 4 warps of 32 rows (two
// 16-row m-tiles each, so every K or V fragment read from shared memory feeds two mma); the CTA's Q
// tile waits in shared memory and its fragments come by ldmatrix per k-step. K/V tiles of 64 cached
// positions go to shared memory, S = Q K^T and O += P V run on mma.sync m16n8k16 with fp32
// accumulation, and the online softmax stays in registers (the accumulator layout of S is the A-operand
// layout of P, so P never leaves registers). Causal and sliding-window masks use each row's own
// position, so any chunk of a sequence works; a tile every row of a warp sees whole skips the mask.
// K/V tiles are double-buffered: tile j + 1 travels (cp.async for a 16-bit cache) while tile j is
// computed, so each tile costs one barrier; the block-table entries of tile j + 2 are read during tile
// j, so no copy waits on a table lookup. K and V fragments come out of shared memory by ldmatrix (V
// transposed): one instruction per two mma operands. The grid runs the query heads fastest (the heads of
// one KV group read the same tiles at about the same time, from L2) and the row tiles last-first (the
// longest causal rows start first, so short ones fill the tail). An FP8 cache's tiles are converted to T
// while they are loaded (every e4m3 value is exact in bf16 and f16), its k_scale rides scale_log2 and
// v_scale the output.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/attention_device.cuh"
#include "runtime/core/cuda_check.h"
#include "runtime/core/error.h"

namespace conveyor::cuda_detail {
namespace {

constexpr int kWarps = 4;
constexpr int kMt = 2;                    // 16-row m-tiles per warp
constexpr int kRows = 16 * kMt * kWarps;  // query rows per CTA
constexpr int kKeys = 64;                 // cached positions per tile
constexpr int kThreads = 32 * kWarps;

// How the CTA's threads share a K/V tile's copies: thread t takes 8-element piece t % kChunks of rows
// t / kChunks, + kRowsPerPass, ... (kRowsPerThread of them), the same rows of K and of V.
template <int D>
struct TileSplit {
  static constexpr int kChunks = D / 8;
  static constexpr int kRowsPerPass = kThreads / kChunks;
  static constexpr int kRowsPerThread = kKeys / kRowsPerPass;
  static __device__ __forceinline__ int row(int i) { return i * kRowsPerPass + static_cast<int>(threadIdx.x) / kChunks; }
};

template <typename T>
__device__ __forceinline__ void mma16816(float* c, const uint32_t* a, uint32_t b0, uint32_t b1);
template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma16816<__half>(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two fp32 values as one register of two 16-bit elements, lo in the low half (the smaller index).
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  const T a = Elem<T>::from_float(lo), b = Elem<T>::from_float(hi);
  return static_cast<uint32_t>(reinterpret_cast<const uint16_t&>(a)) |
         (static_cast<uint32_t>(reinterpret_cast<const uint16_t&>(b)) << 16);
}

// 8 cache elements of type KV at p as 8 T values in one 16-byte vector: a 16-bit cache's as they are,
// an FP8 cache's 8 codes converted (exactly) to T.
template <typename T, typename KV>
__device__ __forceinline__ uint4 load8_as(const KV* p) {
  if constexpr (sizeof(KV) == 1) {
    const uint2 raw = __ldg(reinterpret_cast<const uint2*>(p));
    float f[8];
    unpack8<Fp8Kv>(make_uint4(raw.x, raw.y, 0u, 0u), f);
    return make_uint4(pack2<T>(f[0], f[1]), pack2<T>(f[2], f[3]), pack2<T>(f[4], f[5]), pack2<T>(f[6], f[7]));
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
  if (block < 0 || block >= a.num_blocks) return -1;
  return (static_cast<long long>(block) * a.block_size + p % a.block_size) * a.n_kv_heads * head_dim;
}

// Starts loading one K or V tile (positions [k0, k0 + kKeys) at the offsets rows[0 .. kKeys), zero where
// an offset is -1) into smem as T: a 16-bit cache by cp.async (the caller commits and waits), an FP8 one
// through registers, converted.
template <typename T, typename KV, int D, int kStride>
__device__ __forceinline__ void load_tile(uint16_t* dst, const KV* cache, const long long* rows, int kvh) {
  using Split = TileSplit<D>;
  const int col = (threadIdx.x % Split::kChunks) * 8;
  const KV* head = cache + static_cast<long long>(kvh) * D + col;
#pragma unroll
  for (int i = 0; i < Split::kRowsPerThread; ++i) {
    const int r = Split::row(i);
    const long long row = rows[r];
    uint16_t* d = dst + r * kStride + col;
    if constexpr (sizeof(KV) == 2) {
      cp_async16(d, head + (row >= 0 ? row : 0), row >= 0);
    } else {
      *reinterpret_cast<uint4*>(d) = row >= 0 ? load8_as<T>(head + row) : make_uint4(0, 0, 0, 0);
    }
  }
}

// ldmatrix: four 8 x 8 matrices of 16-bit elements, lanes 8i .. 8i + 7 giving the row addresses of
// matrix i; lane l gets, of each matrix, row l / 4's columns 2 (l % 4) and 2 (l % 4) + 1 (.trans: column
// l / 4's rows 2 (l % 4) and 2 (l % 4) + 1).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const uint16_t* p) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const uint16_t* p) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// Key ranges of one CTA: each lane's rows (g and g + 8 of each of its warp's m-tiles) see [lo, pos]; the
// CTA loads tiles over the union, a warp computes only on tiles that touch its own rows.
struct RowRanges {
  int pos[kMt][2];              // pos -1: row past the end of the sequence's chunk; a row sees [lo(pos), pos]
  int window;
  __device__ __forceinline__ int lo(int p) const { return window > 0 ? max(0, p - window + 1) : 0; }
  int cta_first, cta_last;      // union over the CTA
  int warp_first, warp_last;    // union over the warp
  int whole_first, whole_last;  // keys every row of the warp sees (empty when a row is past the chunk)
};

__device__ __forceinline__ RowRanges row_ranges(const PagedAttentionArgs& a, int q0, int qlen, int first_row) {
  __shared__ int range_s[2];
  RowRanges r;
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

// Starts loading the CTA's Q tile (rows row0 .. + kRows of query head `head`, zero past the chunk) into
// q_s by cp.async; the caller commits.
template <int D, int kStride>
__device__ __forceinline__ void load_q_tile(uint16_t* q_s, const PagedAttentionArgs& a, int q0, int qlen, int row0,
                                            int head) {
  constexpr int kChunks = D / 8, kRowsPerPass = kThreads / kChunks;
  const uint16_t* qp = static_cast<const uint16_t*>(a.q);
  const int col = (threadIdx.x % kChunks) * 8;
#pragma unroll
  for (int i = 0; i < kRows / kRowsPerPass; ++i) {
    const int r = i * kRowsPerPass + static_cast<int>(threadIdx.x) / kChunks;
    const bool ok = row0 + r < qlen;
    const long long off = ok ? (static_cast<long long>(q0 + row0 + r) * a.n_heads + head) * D + col : 0;
    cp_async16(q_s + r * kStride + col, qp + off, ok);
  }
}

// S = Q K^T for the warp's two m-tiles and the tile's kKeys keys, scaled to log2 units and (kMask)
// masked. Q fragments by ldmatrix from q_w (the warp's 32 rows); each K fragment feeds both m-tiles.
template <typename T, int D, int kStride, bool kMask>
__device__ __forceinline__ void tile_scores(float (&s)[kMt][kKeys / 8][4], const uint16_t* q_w, const uint16_t* k_s,
                                            const RowRanges& r, int k0, float scale_log2) {
  const int lane = threadIdx.x % 32, tq = lane % 4;
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt)
#pragma unroll
    for (int n = 0; n < kKeys / 8; ++n) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.f;
  // Matrix i of a Q ldmatrix: rows 8 (i % 2) .. + 8 of the m-tile, head dims kk * 16 + 8 (i / 2) .. + 8 (A).
  const uint16_t* qr = q_w + (lane % 8 + (lane / 8) % 2 * 8) * kStride + (lane / 16) * 8;
  // Matrix i of a K ldmatrix: keys (n + i / 2) * 8 .. + 8, head dims kk * 16 + 8 (i % 2) .. + 8 (B of one k-step
  // for two n-steps).
  const uint16_t* kr = k_s + ((lane / 16) * 8 + lane % 8) * kStride + (lane / 8) % 2 * 8;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t qa[kMt][4];
#pragma unroll
    for (int mt = 0; mt < kMt; ++mt) ldmatrix_x4(qa[mt], qr + mt * 16 * kStride + kk * 16);
#pragma unroll
    for (int n = 0; n < kKeys / 8; n += 2) {
      uint32_t b[4];
      ldmatrix_x4(b, kr + n * 8 * kStride + kk * 16);
#pragma unroll
      for (int mt = 0; mt < kMt; ++mt) {
        mma16816<T>(s[mt][n], qa[mt], b[0], b[1]);
        mma16816<T>(s[mt][n + 1], qa[mt], b[2], b[3]);
      }
    }
  }
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt)
#pragma unroll
    for (int n = 0; n < kKeys / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {  // accumulator e: row g + 8 * (e >> 1), key column 2 * tq + (e & 1)
        const int i = e >> 1, p = k0 + n * 8 + 2 * tq + (e & 1);
        s[mt][n][e] = !kMask || (p <= r.pos[mt][i] && p >= r.lo(r.pos[mt][i])) ? s[mt][n][e] * scale_log2 : kNegInf;
      }
}

// Online softmax over one tile for one m-tile: new row maxima (shared by the 4 lanes of a row), rescale
// of O and of the partial sums, and s turned into probabilities.
template <int D>
__device__ __forceinline__ void softmax_update(float (&s)[kKeys / 8][4], float (&o)[D / 8][4], float (&m)[2],
                                               float (&l)[2]) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float mx = m[i];
#pragma unroll
    for (int n = 0; n < kKeys / 8; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * i], s[n][2 * i + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float safe = mx == kNegInf ? 0.f : mx;  // nothing visible yet: keep everything at zero
    const float alpha = exp2f(m[i] - safe);
    m[i] = mx;
    l[i] *= alpha;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      o[n][2 * i] *= alpha;
      o[n][2 * i + 1] *= alpha;
    }
#pragma unroll
    for (int n = 0; n < kKeys / 8; ++n) {
      s[n][2 * i] = exp2f(s[n][2 * i] - safe);
      s[n][2 * i + 1] = exp2f(s[n][2 * i + 1] - safe);
      l[i] += s[n][2 * i] + s[n][2 * i + 1];
    }
  }
}

// O += P V for both m-tiles: P straight from the S accumulators (their layout is the A-operand layout),
// V fragments transposed by ldmatrix (pairs along the key axis), each feeding both m-tiles.
template <typename T, int D, int kStride>
__device__ __forceinline__ void accumulate_pv(float (&o)[kMt][D / 8][4], const float (&s)[kMt][kKeys / 8][4],
                                              const uint16_t* v_s) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int kk = 0; kk < kKeys / 16; ++kk) {
    uint32_t pa[kMt][4];
#pragma unroll
    for (int mt = 0; mt < kMt; ++mt) {
      pa[mt][0] = pack2<T>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
      pa[mt][1] = pack2<T>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
      pa[mt][2] = pack2<T>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
      pa[mt][3] = pack2<T>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
    }
    // Matrix i of an ldmatrix.trans: keys kk * 16 + 8 (i % 2) .. + 8, head dims (n + i / 2) * 8 .. + 8 (B of
    // two mma n-steps).
    const uint16_t* vr = v_s + (kk * 16 + (lane / 8) % 2 * 8 + lane % 8) * kStride + (lane / 16) * 8;
#pragma unroll
    for (int n = 0; n < D / 8; n += 2) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, vr + n * 8);
#pragma unroll
      for (int mt = 0; mt < kMt; ++mt) {
        mma16816<T>(o[mt][n], pa[mt], b[0], b[1]);
        mma16816<T>(o[mt][n + 1], pa[mt], b[2], b[3]);
      }
    }
  }
}

// One tile's work for a warp whose rows it touches: scores (masked unless every row sees the whole
// tile), the online softmax per m-tile, O += P V.
template <typename T, int D, int kStride>
__device__ __forceinline__ void attend_tile(float (&o)[kMt][D / 8][4], float (&m)[kMt][2], float (&l)[kMt][2],
                                            const uint16_t* q_w, const uint16_t* k_s, const uint16_t* v_s,
                                            const RowRanges& r, int k0, float scale_log2) {
  float s[kMt][kKeys / 8][4];
  if (k0 >= r.whole_first && k0 + kKeys - 1 <= r.whole_last) {  // uniform over the warp
    tile_scores<T, D, kStride, false>(s, q_w, k_s, r, k0, scale_log2);
  } else {
    tile_scores<T, D, kStride, true>(s, q_w, k_s, r, k0, scale_log2);
  }
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt) softmax_update<D>(s[mt], o[mt], m[mt], l[mt]);
  accumulate_pv<T, D, kStride>(o, s, v_s);
}

template <int D>
constexpr int smem_bytes() {
  return (kRows + 4 * kKeys) * (D + 8) * static_cast<int>(sizeof(uint16_t));  // Q, then K and V in two buffers each
}

template <typename T, typename KV, int D>
__global__ void __launch_bounds__(kThreads, 2) prefill_kernel(PagedAttentionArgs a) {
  constexpr int kStride = D + 8;  // padding keeps the fragment reads free of bank conflicts
  constexpr int kTile = kKeys * kStride;
  extern __shared__ __align__(16) uint16_t smem[];  // Q, K buffers 0 and 1, V buffers 0 and 1
  uint16_t* q_s = smem;
  uint16_t* kv_s = smem + kRows * kStride;

  const int head = blockIdx.x, seq = blockIdx.z;
  const int q0 = __ldg(a.query_start + seq);
  const int qlen = __ldg(a.query_start + seq + 1) - q0;
  const int row0 = (gridDim.y - 1 - blockIdx.y) * kRows;  // last rows first: they have the most keys
  if (qlen <= 1 || row0 >= qlen) return;  // decodes belong to the decode kernel; uniform over the CTA
  const int kvh = head / a.group;
  const int warp_row = (threadIdx.x / 32) * 16 * kMt;  // the warp's first row within the CTA's
  const int g = (threadIdx.x % 32) / 4, tq = threadIdx.x % 4;
  const RowRanges r = row_ranges(a, q0, qlen, row0 + warp_row);

  float o[kMt][D / 8][4];
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt)
#pragma unroll
    for (int n = 0; n < D / 8; ++n) o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.f;
  float m[kMt][2], l[kMt][2];  // l: this lane's partial row sums
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt) m[mt][0] = m[mt][1] = kNegInf, l[mt][0] = l[mt][1] = 0.f;

  const int32_t* table = a.block_tables + static_cast<long long>(seq) * a.max_blocks;
  const KV* kc = static_cast<const KV*>(a.k_cache);
  const KV* vc = static_cast<const KV*>(a.v_cache);
  __shared__ long long rows_s[2][kKeys];  // pool offsets of the next tiles' positions, by buffer
  load_q_tile<D, kStride>(q_s, a, q0, qlen, row0, head);
  const int t = threadIdx.x;
  if (t < kKeys) {
    const int p0 = r.cta_first + t, p1 = p0 + kKeys;
    rows_s[0][t] = row_offset(a, table_entry(table, a, p0, r.cta_last), p0, D);
    rows_s[1][t] = row_offset(a, table_entry(table, a, p1, r.cta_last), p1, D);
  }
  __syncthreads();
  if (r.cta_first <= r.cta_last) {
    load_tile<T, KV, D, kStride>(kv_s, kc, rows_s[0], kvh);
    load_tile<T, KV, D, kStride>(kv_s + 2 * kTile, vc, rows_s[0], kvh);
  }
  cp_async_commit();  // Q and the first tile
  int buf = 0;
  for (int k0 = r.cta_first; k0 <= r.cta_last; k0 += kKeys, buf ^= 1) {
    cp_async_wait<0>();  // tile k0 (and the first time Q) has landed
    __syncthreads();     // ... for every thread, and every warp is done with the other buffer's tile
    if (k0 + kKeys <= r.cta_last) {
      load_tile<T, KV, D, kStride>(kv_s + (buf ^ 1) * kTile, kc, rows_s[buf ^ 1], kvh);
      load_tile<T, KV, D, kStride>(kv_s + (2 + (buf ^ 1)) * kTile, vc, rows_s[buf ^ 1], kvh);
      cp_async_commit();
    }
    const int p2 = k0 + 2 * kKeys + t;  // tile k0 + 2 kKeys: its table entry travels while this tile computes
    const int entry = t < kKeys ? table_entry(table, a, p2, r.cta_last) : -1;
    if (k0 <= r.warp_last && k0 + kKeys - 1 >= r.warp_first) {  // uniform over the warp
      attend_tile<T, D, kStride>(o, m, l, q_s + warp_row * kStride, kv_s + buf * kTile, kv_s + (2 + buf) * kTile, r,
                                 k0, a.scale_log2);
    }
    if (t < kKeys) rows_s[buf][t] = row_offset(a, entry, p2, D);  // tile k0's offsets are used up
  }

  uint16_t* outp = static_cast<uint16_t*>(a.out);
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      float sum = l[mt][i];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      if (r.pos[mt][i] < 0) continue;
      const float inv = (sum > 0.f ? 1.f / sum : 0.f) * a.v_scale;  // v_scale: 1 unless the cache is FP8
      const long long base = (static_cast<long long>(q0 + row0 + warp_row + 16 * mt + g + 8 * i) * a.n_heads + head) * D;
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        *reinterpret_cast<uint32_t*>(outp + base + n * 8 + 2 * tq) =
            pack2<T>(o[mt][n][2 * i] * inv, o[mt][n][2 * i + 1] * inv);
      }
    }
}

// Launches one instantiation, its dynamic shared memory allowed once per process (over 48 KiB at D 128).
template <typename T, typename KV, int D>
void launch_d(const PagedAttentionArgs& a, const dim3& grid, cudaStream_t s) {
  static const cudaError_t allowed =
      cudaFuncSetAttribute(prefill_kernel<T, KV, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes<D>());
  CONVEYOR_CUDA_CHECK(allowed);
  prefill_kernel<T, KV, D><<<grid, kThreads, smem_bytes<D>(), s>>>(a);
}

template <typename T, typename KV>
void launch_t(const PagedAttentionArgs& a, int max_query_len, cudaStream_t s) {
  const dim3 grid(a.n_heads, (max_query_len + kRows - 1) / kRows, a.num_seqs);
  if (a.head_dim == 64) {
    launch_d<T, KV, 64>(a, grid, s);
  } else {
    launch_d<T, KV, 128>(a, grid, s);
  }
  CONVEYOR_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

bool prefill_kernel_supports(int head_dim) { return head_dim == 64 || head_dim == 128; }

void launch_prefill_attention(const PagedAttentionArgs& a, int max_query_len, DType dt, cudaStream_t s) {
  CONVEYOR_CHECK(prefill_kernel_supports(a.head_dim), "prefill attention: head_dim ", a.head_dim,
                 " has no tensor-core kernel (64 or 128)");
  CONVEYOR_CHECK(a.num_seqs <= 65535 && (max_query_len + kRows - 1) / kRows <= 65535,
                 "prefill attention: grid too large (", a.num_seqs, " sequences, ", max_query_len, " query rows)");
  if (dt == DType::kBF16) {
    if (a.kv_fp8) launch_t<__nv_bfloat16, Fp8Kv>(a, max_query_len, s);
    else launch_t<__nv_bfloat16, __nv_bfloat16>(a, max_query_len, s);
  } else {
    if (a.kv_fp8) launch_t<__half, Fp8Kv>(a, max_query_len, s);
    else launch_t<__half, __half>(a, max_query_len, s);
  }
}

}  // namespace conveyor::cuda_detail
