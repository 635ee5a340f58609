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

#include <cstdlib>
#include <string>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_device.cuh"
#include "kernels/cuda/attention_prefill_tile.cuh"
#include "runtime/core/cuda_check.h"
#include "runtime/core/error.h"

namespace conveyor::cuda_detail {
namespace {

using namespace prefill;  // NOLINT: the shared tile pieces

constexpr int kWarps = 4;
constexpr int kMt = 2;                    // 16-row m-tiles per warp
constexpr int kRows = 16 * kMt * kWarps;  // query rows per CTA
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

// S = Q K^T for the warp's two m-tiles and the tile's kKeys keys, (kMask) masked. Q fragments by ldmatrix from q_w (the warp's 32 rows); each K fragment feeds both m-tiles.
template <typename T, int D, int kStride, bool kMask>
__device__ __forceinline__ void tile_scores(float (&s)[kMt][kKeys / 8][4], const uint16_t* q_w, const uint16_t* k_s,
                                            const RowRanges<kMt>& r, int k0) {
  const int lane = threadIdx.x % 32;
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
  if constexpr (kMask) {
#pragma unroll
    for (int mt = 0; mt < kMt; ++mt) mask_scores(s[mt], r, mt, k0);
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
                                            const RowRanges<kMt>& r, int k0, float scale_log2) {
  float s[kMt][kKeys / 8][4];
  if (k0 >= r.whole_first && k0 + kKeys - 1 <= r.whole_last) {  // uniform over the warp
    tile_scores<T, D, kStride, false>(s, q_w, k_s, r, k0);
  } else {
    tile_scores<T, D, kStride, true>(s, q_w, k_s, r, k0);
  }
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt) softmax_update<D>(s[mt], o[mt], m[mt], l[mt], scale_log2);
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

  CtaTile c;
  if (!c.locate(a, kRows)) return;
  const int head = c.head, kvh = c.kvh, seq = c.seq, q0 = c.q0, qlen = c.qlen, row0 = c.row0;
  const int warp_row = (threadIdx.x / 32) * 16 * kMt;  // the warp's first row within the CTA's
  const RowRanges<kMt> r = row_ranges<kMt>(a, q0, qlen, row0 + warp_row);

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

#pragma unroll
  for (int mt = 0; mt < kMt; ++mt) store_rows<T, D>(a, o[mt], l[mt], r.pos[mt], q0 + row0 + warp_row + 16 * mt, head);
}

struct Kernel {  // for prefill::Launch; smem over 48 KiB at D 128
  static constexpr int kBlock = kThreads;
  template <typename KV, int D> static constexpr int smem() { return smem_bytes<D>(); }
  template <typename T, typename KV, int D> static auto fn() { return prefill_kernel<T, KV, D>; }
};

// The choice before any set_prefill_attention_kernel: CONVEYOR_PREFILL_ATTENTION=mma.sync or wgmma forces
// one (A/B runs of whole workloads, like vLLM's VLLM_ATTENTION_BACKEND); unset, the automatic choice.
PrefillAttentionKernel initial_choice() {
  const char* v = std::getenv("CONVEYOR_PREFILL_ATTENTION");
  if (v == nullptr || *v == '\0') return PrefillAttentionKernel::kAuto;
  const std::string s(v);
  CONVEYOR_CHECK(s == "mma.sync" || s == "wgmma", "CONVEYOR_PREFILL_ATTENTION='", s,
                 "': expected mma.sync or wgmma (or unset for the automatic choice)");
  return s == "wgmma" ? PrefillAttentionKernel::kWgmma : PrefillAttentionKernel::kMmaSync;
}

PrefillAttentionKernel g_forced = PrefillAttentionKernel::kAuto;
bool g_forced_read = false;  // g_forced holds the environment's or set_prefill_attention_kernel's choice

PrefillAttentionKernel forced() {
  if (!g_forced_read) g_forced = initial_choice(), g_forced_read = true;
  return g_forced;
}
int g_wgmma = -1;  // wgmma_prefill_built() once asked outside a capture; -1 not yet

// Whether this launch takes the wgmma kernel: forced, or the automatic choice wherever the sm_90a code
// runs (the H100 of round 7: 297 against mma.sync's 267 TFLOP/s at 8k, 243 against 167 for a 512-token
// chunk after 3,584, docs/bench.md). Whether the device runs it comes from a synchronous query, which a
// stream capture forbids: the automatic choice of a launch captured before any other is mma.sync.
bool use_wgmma(cudaStream_t s) {
  const PrefillAttentionKernel k = forced();
  if (k == PrefillAttentionKernel::kMmaSync) return false;
  if (g_wgmma < 0) {
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    CONVEYOR_CUDA_CHECK(cudaStreamIsCapturing(s, &st));
    if (st != cudaStreamCaptureStatusNone) {
      CONVEYOR_CHECK(k == PrefillAttentionKernel::kAuto, "prefill attention: the wgmma kernel was asked for "
                     "inside a stream capture before any launch outside one");
      return false;
    }
    g_wgmma = wgmma_prefill_built() ? 1 : 0;
  }
  CONVEYOR_CHECK(g_wgmma == 1 || k == PrefillAttentionKernel::kAuto, "prefill attention: the wgmma kernel was "
                 "asked for, but this GPU or build has no sm_90a code (it needs an sm_90 GPU and "
                 "CMAKE_CUDA_ARCHITECTURES with 90a)");
  return g_wgmma == 1;
}

}  // namespace

bool prefill_kernel_supports(int head_dim) { return head_dim == 64 || head_dim == 128; }

void launch_prefill_attention(const PagedAttentionArgs& a, int max_query_len, DType dt, cudaStream_t s) {
  CONVEYOR_CHECK(prefill_kernel_supports(a.head_dim), "prefill attention: head_dim ", a.head_dim,
                 " has no tensor-core kernel (64 or 128)");
  if (use_wgmma(s)) {
    launch_wgmma_prefill(a, max_query_len, dt, s);
    return;
  }
  Launch<Kernel> launch{a, prefill_grid(a, max_query_len, kRows), s};
  dispatch(a, dt, launch);
}

}  // namespace conveyor::cuda_detail

namespace conveyor {

void set_prefill_attention_kernel(PrefillAttentionKernel k) {
  cuda_detail::g_forced = k;
  cuda_detail::g_forced_read = true;
}

const char* prefill_attention_kernel_name() {
  return cuda_detail::use_wgmma(nullptr) ? "wgmma" : "mma.sync";
}

}  // namespace conveyor
