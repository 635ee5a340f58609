// gemv_cuda and fp8_gemv_cuda (see gemv.h). Each warp multiplies a tile of 8 (or 16) rows of w by all
// tokens with the m16n8k16 tensor-core mma: A = the 16 token rows of x (rows >= m repeat token 0 and are dropped),
// B = 8 rows of w, so w tiles are 8 rows (twice the CTAs of putting w in A). The k order inside an
// mma is free, so a lane feeds it whole 16-byte packs (8 consecutive k) of x and w instead of the
// 4-byte pairs the fragment layout names: every load is 16 bytes, every w byte is loaded once.
//
// Bandwidth and occupancy (H200: 132 SMs, 4.28 TB/s, ~0.7 us loaded DRAM latency -> ~3 MB in flight,
// ~23 KB per SM). A block owns 8 * kTiles rows of w and splits k over its warps (8, or 16 when there
// are fewer than two blocks per SM); each lane loads chunks of 8 16-byte w packs, double-buffered, so
// 8 loads per lane are in flight while the previous chunk's mmas run. At 128 registers an SM holds
// 16 warps: 16 x 32 x 8 x 16 B = 64 KB in flight, ~3x the need. n = 1024 gives 128 blocks of 16
// warps (one per SM); n = 4096 / 6144 / 28672 / 128256 give 256-16032 blocks of 8 warps, so no split-k
// across blocks (and no reduction launch) is needed. The per-warp fp32 partials are summed through
// shared memory at the end, with the bias/accumulate epilogue. x (<= 16 x 14336 x 2 B = 448 KB) is
// re-read by every block via __ldg: it stays in L2 and largely in L1, since w is loaded with the
// evict-first hint (__ldcs). L1 traffic for x is m / (8 * kTiles) times that of w, hence kTiles = 2
// for m > 8 when n still gives one block per SM. FP8 runs the same kernel on e4m3 codes: a 16-byte
// pack holds 16 k instead of 8 and the mma is m16n8k32, so a chunk covers twice the k for the same
// bytes in flight; the epilogue applies the token and column scales, and at m <= 8 takes two row tiles where
// the grid still covers the SMs (an e4m3 row is half a bf16 row's bytes). At m <= 8, where x's halves fit the
// fused kernels' shared memory, FP8 takes Fp8Half instead: x made f16 once per block, w converted in registers
// for the m16n8k16 f16 mma (sm_90 emulates the e4m3 one, converting both operands at every use).
//
// Fused inputs (gemv_rms_norm_cuda, gemv_silu_mul_cuda): every block first makes x itself in shared memory from
// the op before (the RMSNorm of the hidden rows, or SwiGLU of the gate|up rows: rows of 4-28 KB, read from L2),
// rounded exactly as rms_norm_cuda and silu_mul_cuda round them, so y is the two-kernel path's bit for bit with
// one launch and one kernel boundary fewer. The norm's sum of squares is spread over the threads as
// rms_norm_cuda spreads it (row_ops.cuh: the same partial sums, reduced in the same order), whatever the block.
#include "kernels/cuda/gemv.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "kernels/cuda/dense_vec.cuh"
#include "kernels/cuda/gemv_prologue.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/row_ops.cuh"
#include "runtime/core/cuda_check.h"

namespace conveyor {
namespace {

using cuda_detail::is_aligned16;
using cuda_detail::load_as_f32;
using cuda_detail::store_from_f32;
using cuda_detail::e4m3x4_to_f16x2x2;
using gemv_detail::make_x;
using gemv_detail::make_x_fp8;
using gemv_detail::Prologue;
using gemv_detail::PrologueArgs;

constexpr int kTileRows = 8;   // rows of w per mma (its N)
constexpr int kLanePacks = 4;  // lanes sharing one row: a warp step covers 4 packs = 32 k per row
constexpr int kMaxWarps = 16;
constexpr int kLoadsInFlight = 8;  // 16-byte w loads a lane issues before consuming them

// What the kernel streams: 16-bit elements (8 per 16-byte pack, m16n8k16 bf16/f16 mma) or e4m3
// codes (16 per pack, m16n8k32 e4m3 mma, sm_89+). The fragment layouts of the two mmas put the same k
// slots in the same registers (a0/b0: the lane's first 4 bytes-worth of k, a2/b1: the next), so one
// register wiring serves both.
// Fp8Half: e4m3 weights against x made f16 in shared memory (exactly: e4m3 -> f16 is exact) by each block, fed
// to the f16 mma (m16n8k16) with the weights converted in registers. sm_90 has no e4m3 mma.sync: ptxas emulates
// Fp8Codes' with f16 mmas that convert both operands on every use, so x's conversions, the same count as w's at
// one row tile, are made once per block here instead.
struct Fp8Codes {};
struct Fp8Half {};
template <typename T>
struct Elem {
  using Storage = T;   // w
  using XStorage = T;  // x as the warps read it
  static constexpr int kPack = 8;
};
template <>
struct Elem<Fp8Codes> {
  using Storage = uint8_t;
  using XStorage = uint8_t;
  static constexpr int kPack = 16;
};
template <>
struct Elem<Fp8Half> {
  using Storage = uint8_t;
  using XStorage = __half;
  static constexpr int kPack = 16;  // a pack of w; its x is two 16-byte packs of halves
};

template <typename T>
__device__ __forceinline__ void mma_tile(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // gemv_cuda refuses devices below sm_80 before launching
#else
  if constexpr (std::is_same_v<T, Fp8Codes>) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
    __trap();  // fp8_gemv_cuda refuses devices below sm_89 before launching
#else
    asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
#endif
}

// Where the block's sums go: y (+)= sum (* a_scale[token] * b_scale[column], FP8) + bias, in y's dtype.
struct Epilogue {
  void* y;
  DType out;
  const void* bias;  // or nullptr
  DType bias_dt;
  const float* a_scale;  // FP8 only: per token
  const float* b_scale;  // FP8 only: per output column
  bool accumulate;
};

// Lane (g = lane / 4, q = lane % 4) of a warp step at pack base s * 4 reads pack p = s * 4 + q of
// w row (tile row g) and of x rows g and g + 8. With X, H the x packs and W the w pack, the two
// mmas get A = {X.x, H.x, X.y, H.y}, B = {W.x, W.y} and A = {X.z, H.z, X.w, H.w}, B = {W.z, W.w}:
// for every lane, fragment k-slots 2q, 2q+1 (and 2q+8, 2q+9) hold elements 8p+0,1 (and 8p+2,3) of
// both operands (then 8p+4..7), so each product pairs the same k. Output: d[0..1] = token g, tile
// columns 2q, 2q+1; d[2..3] = token g + 8, same columns.
template <typename T, bool kHighTokens, int kTiles, bool kSharedX = false>
struct WarpTile {
  using S = typename Elem<T>::Storage;
  using XS = typename Elem<T>::XStorage;
  static constexpr int kPack = Elem<T>::kPack;
  static constexpr int kSteps = kLoadsInFlight / kTiles;  // warp steps per chunk
  static constexpr int kChunkPacks = kSteps * kLanePacks;  // packs of one row per chunk
  using Loads = uint4[kSteps][kTiles];
  const S* w_row[kTiles];  // rows past n are clamped to row n - 1: read, never written out
  const XS* x_lo;          // token g (clamped to token 0 past m: its outputs are never written)
  const XS* x_hi;          // token g + 8, likewise
  int q;
  // Two accumulator sets (even and odd steps) halve the chain of dependent mmas.
  float acc[2][kTiles][4] = {};

  // The w packs of chunk c. kChecked: packs past k read nothing and count as zeros.
  template <bool kChecked>
  __device__ __forceinline__ void load(Loads& wv, int c, int packs) const {
#pragma unroll
    for (int u = 0; u < kSteps; ++u) {
      const int p = (c * kSteps + u) * kLanePacks + q;
#pragma unroll
      for (int t = 0; t < kTiles; ++t) {
        wv[u][t] = !kChecked || p < packs ? __ldcs(reinterpret_cast<const uint4*>(w_row[t] + p * kPack))
                                          : make_uint4(0, 0, 0, 0);
      }
    }
  }

  // x: through the read-only cache from global memory, or from the block's shared copy (a generic load).
  static __device__ __forceinline__ uint4 load_x(const XS* p) {
    if constexpr (kSharedX) return *reinterpret_cast<const uint4*>(p);
    else return __ldg(reinterpret_cast<const uint4*>(p));
  }

  // Multiplies chunk c's w packs by the matching x packs (L1/L2 hits after the first block).
  template <bool kChecked>
  __device__ __forceinline__ void compute(const Loads& wv, int c, int packs) {
    const uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < kSteps; ++u) {
      const int p = (c * kSteps + u) * kLanePacks + q;
      const bool ok = !kChecked || p < packs;
      const uint4 xl = ok ? load_x(x_lo + p * kPack) : zero;
      const uint4 xh = kHighTokens && ok ? load_x(x_hi + p * kPack) : zero;
      if constexpr (std::is_same_v<T, Fp8Half>) {  // m <= 8: x is the 16 k of the pack as two packs of halves
        const uint4 x2 = ok ? load_x(x_lo + p * kPack + 8) : zero;
        const uint32_t xa[8] = {xl.x, xl.y, xl.z, xl.w, x2.x, x2.y, x2.z, x2.w};
#pragma unroll
        for (int t = 0; t < kTiles; ++t) {
          const uint32_t wr[4] = {wv[u][t].x, wv[u][t].y, wv[u][t].z, wv[u][t].w};
#pragma unroll
          for (int i = 0; i < 4; ++i) {  // w's 4 codes of word i: k 4i .. 4i + 3, two f16 pairs
            uint32_t lo, hi;
            e4m3x4_to_f16x2x2(wr[i], lo, hi);
            mma_tile<__half>(acc[i & 1][t], xa[2 * i], 0u, xa[2 * i + 1], 0u, lo, hi);
          }
        }
      } else {
#pragma unroll
        for (int t = 0; t < kTiles; ++t) {
          if constexpr (std::is_same_v<T, Fp8Codes>) {
            // Hopper's tensor cores keep fewer bits than fp32 when they add FP8 products into an
            // accumulator; the two mmas' 64 products are summed there from zero and promoted to the
            // fp32 sum here, as cuBLASLt's non-fast-accumulate FP8 GEMMs do every k-tile. The mma chain is
            // two long, so one accumulator set (the second, always zero, folds away) keeps registers for
            // two row tiles without spilling.
            float part[4] = {0.f, 0.f, 0.f, 0.f};
            mma_tile<T>(part, xl.x, xh.x, xl.y, xh.y, wv[u][t].x, wv[u][t].y);
            mma_tile<T>(part, xl.z, xh.z, xl.w, xh.w, wv[u][t].z, wv[u][t].w);
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[0][t][i] += part[i];
          } else {
            mma_tile<T>(acc[u & 1][t], xl.x, xh.x, xl.y, xh.y, wv[u][t].x, wv[u][t].y);
            mma_tile<T>(acc[u & 1][t], xl.z, xh.z, xl.w, xh.w, wv[u][t].z, wv[u][t].w);
          }
        }
      }
    }
  }

  // Chunks warp, warp + warps, ... of the whole ones, double-buffered: the loads of the next chunk
  // are issued before the mmas of this one. (Within one chunk ptxas moves each load down to just
  // before its use, leaving ~1 load in flight; across loop iterations it cannot.) Then the one
  // partial chunk at the end of k, if any, by the warp whose turn it is.
  // kIssued: the loads of the warp's first whole chunk are in a already (issue_first; the pipelined kernel issues
  // them for the next tile before the barriers of this one's sums).
  template <bool kIssued = false>
  __device__ __forceinline__ void run(int warp, int warps, int packs, Loads& a) {
    const int full = packs / kChunkPacks;
    Loads b;
    int c = warp;
    if (c < full) {
      if constexpr (!kIssued) load<false>(a, c, packs);
      while (true) {
        const int c1 = c + warps;
        if (c1 < full) load<false>(b, c1, packs);
        compute<false>(a, c, packs);
        if (c1 >= full) break;
        const int c2 = c1 + warps;
        if (c2 < full) load<false>(a, c2, packs);
        compute<false>(b, c1, packs);
        if (c2 >= full) break;
        c = c2;
      }
    }
    if (packs % kChunkPacks != 0 && full % warps == warp) {
      load<true>(a, full, packs);
      compute<true>(a, full, packs);
    }
  }
  __device__ __forceinline__ void issue_first(Loads& a, int warp, int packs) const {
    if (warp < packs / kChunkPacks) load<false>(a, warp, packs);
  }

  // Points the lane at the block tile whose first row of w is col0 (rows k elements long; x: the m token rows).
  __device__ __forceinline__ void start(const S* w, const XS* x, int64_t col0, int m, int n, int64_t k, int lane) {
    const int g = lane >> 2;
    q = lane & 3;
#pragma unroll
    for (int t = 0; t < kTiles; ++t) {
      const int64_t r = col0 + t * kTileRows + g;
      w_row[t] = w + (r < n ? r : n - 1) * k;
    }
    x_lo = x + (g < m ? g : 0) * k;
    x_hi = x + (kHighTokens && g + 8 < m ? g + 8 : 0) * k;
  }

  // The warp's sums into the block's partial[warp] (both accumulator sets added).
  __device__ __forceinline__ void store_partial(float4 (&partial)[kMaxWarps][kTiles][32], int warp, int lane) const {
#pragma unroll
    for (int t = 0; t < kTiles; ++t) {
      const float(&a)[4] = acc[0][t];
      const float(&b)[4] = acc[1][t];
      partial[warp][t][lane] = make_float4(a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3]);
    }
  }
};

// The block's sums of the tile whose first row of w is col0 into y, once every warp's partial is written and
// synchronized: element e = (token, column) of the block's 16 x kCols output; consecutive threads write
// consecutive columns of one token row.
template <int kTiles>
__device__ __forceinline__ void write_block(const Epilogue& ep, const float4 (&partial)[kMaxWarps][kTiles][32],
                                            int64_t col0, int m, int n, int warps) {
  constexpr int kCols = kTileRows * kTiles;
  for (int e = threadIdx.x; e < 16 * kCols; e += blockDim.x) {
    const int tok = e / kCols;
    const int col = e % kCols;
    const int64_t j = col0 + col;
    if (tok >= m || j >= n) continue;
    const int t = col / kTileRows;
    const int c = col % kTileRows;
    const int src = (tok & 7) * 4 + c / 2;
    const int comp = (tok >= 8 ? 2 : 0) + (c & 1);
    float sum = 0.f;
    for (int wi = 0; wi < warps; ++wi) sum += reinterpret_cast<const float*>(&partial[wi][t][src])[comp];
    if (ep.a_scale != nullptr) sum = sum * ep.a_scale[tok] * ep.b_scale[j];  // the order of the FP8 twin
    if (ep.bias != nullptr) sum += load_as_f32(ep.bias, ep.bias_dt, j);
    const int64_t idx = static_cast<int64_t>(tok) * n + j;
    store_from_f32(ep.y, ep.out, idx, ep.accumulate ? load_as_f32(ep.y, ep.out, idx) + sum : sum);
  }
}

template <typename T, bool kHighTokens, int kTiles, Prologue kPro = Prologue::kNone>
__global__ void __launch_bounds__(kMaxWarps * 32)
    gemv_kernel(Epilogue ep, const typename Elem<T>::Storage* x, const typename Elem<T>::Storage* w, int m, int n,
                int packs, PrologueArgs pa, int cfg_packs, int cfg_threads) {
  constexpr bool kFused = kPro != Prologue::kNone;
  using Tile = WarpTile<T, kHighTokens, kTiles, kFused>;
  using XS = typename Elem<T>::XStorage;
  extern __shared__ uint4 fused_x[];  // kFused: x, [m, k] in XS
  constexpr int kCols = kTileRows * kTiles;  // rows of w (columns of y) per block
  __shared__ float4 partial[kMaxWarps][kTiles][32];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  const int64_t k = static_cast<int64_t>(packs) * Elem<T>::kPack;
  // x (and y, the epilogue's) come from the kernel before (pdl.cuh). A prefetch of the first weights into
  // L2 ahead of this wait cost 4-16 bytes of spills a thread at 128 registers as loads; as prefetch.global.L2
  // (no registers; m <= 8, one tile) it made batch 1 bf16 1.1% slower on an H100 (round 12: 0.7368 / 0.7361 s
  // against 0.7283 s), so the overlap is the launch.
  cuda_detail::pdl_wait();
  cuda_detail::pdl_launch_dependents();  // pdl.cuh: after the wait, so at most one kernel waits ahead
  const XS* xp = nullptr;
  if constexpr (kPro == Prologue::kFp8Half) {
    make_x_fp8(reinterpret_cast<__half*>(fused_x), pa, m, packs);
    xp = reinterpret_cast<const XS*>(fused_x);
  } else if constexpr (kFused) {
    auto* xs = reinterpret_cast<XS*>(fused_x);
    make_x<T, kPro>(xs, pa, m, packs, cfg_packs, cfg_threads);
    xp = xs;
  } else {
    xp = x;
  }
  // One block tile (kCols rows of w) per block; fused, a grid of at most two blocks per SM takes them in turn,
  // so each block makes x once (a loop the plain kernel does without: it costs it registers).
  if constexpr (kFused) {
    // The next tile's first chunk is in flight while this one's partials are summed and written: each warp issues
    // its loads before the barriers, so the block's share of the DRAM queue does not drain between its tiles
    // (round 21, H100: batch 1 FP8 0.5287 -> 0.5146 s; the bf16 fused gemv, off by default, was not timed).
    typename Tile::Loads first;
    Tile tile;
    int64_t col0 = int64_t{blockIdx.x} * kCols;
    tile.start(w, xp, col0, m, n, k, lane);
    tile.issue_first(first, warp, packs);
    while (col0 < n) {
      tile.template run<true>(warp, warps, packs, first);
      tile.store_partial(partial, warp, lane);
      const int64_t next = col0 + int64_t{gridDim.x} * kCols;
      if (next < n) {
        tile = Tile{};
        tile.start(w, xp, next, m, n, k, lane);
        tile.issue_first(first, warp, packs);
      }
      __syncthreads();
      write_block<kTiles>(ep, partial, col0, m, n, warps);
      __syncthreads();  // partial is written again
      col0 = next;
    }
  } else {
    const int64_t col0 = int64_t{blockIdx.x} * kCols;
    Tile tile;
    tile.start(w, xp, col0, m, n, k, lane);
    typename Tile::Loads a;
    tile.run(warp, warps, packs, a);
    tile.store_partial(partial, warp, lane);
    __syncthreads();
    write_block<kTiles>(ep, partial, col0, m, n, warps);
  }
}

// Warps per block: fewer than two blocks per SM, twice the warps keep twice the loads in flight; warps beyond
// the number of k chunks would only idle.
int64_t launch_warps(int64_t blocks, int64_t chunks, int sm_count) {
  const int64_t warps = blocks < 2 * static_cast<int64_t>(sm_count) ? kMaxWarps : kMaxWarps / 2;
  return warps < chunks ? warps : (chunks < 1 ? 1 : chunks);
}

template <typename T, bool kHighTokens, int kTiles, Prologue kPro = Prologue::kNone>
void launch(const Epilogue& e, const void* x, const void* w, int m, int n, int packs, int sm_count,
            cudaStream_t stream, const PrologueArgs& pa = {}) {
  using S = typename Elem<T>::Storage;
  constexpr int kCols = kTileRows * kTiles;
  constexpr int kChunkPacks = WarpTile<T, kHighTokens, kTiles, kPro != Prologue::kNone>::kChunkPacks;
  const int64_t blocks = (static_cast<int64_t>(n) + kCols - 1) / kCols;
  const int64_t chunks = (packs + kChunkPacks - 1) / kChunkPacks;
  const int64_t warps = launch_warps(blocks, chunks, sm_count);
  auto* kernel = gemv_kernel<T, kHighTokens, kTiles, kPro>;
  size_t smem = 0;
  cuda_detail::RowPackConfig cfg{1, 32};
  if constexpr (kPro != Prologue::kNone) {
    smem = static_cast<size_t>(m) * static_cast<size_t>(packs) * Elem<T>::kPack * sizeof(typename Elem<T>::XStorage);
    if (kPro == Prologue::kRmsNorm) cfg = cuda_detail::row_pack_config(packs);  // as rms_norm_cuda spreads a row
    static bool sized = false;  // per instantiation: the most shared memory any fused x may take
    if (!sized) {
      CONVEYOR_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(kGemvFusedMaxBytes)));
      sized = true;
    }
  }
  const int64_t grid = kPro == Prologue::kNone || blocks < 2 * int64_t{sm_count} ? blocks : 2 * int64_t{sm_count};
  cuda_detail::launch_maybe_pdl(kernel, dim3(static_cast<unsigned>(grid)), dim3(static_cast<unsigned>(warps * 32)),
                                smem, stream, e, static_cast<const S*>(x), static_cast<const S*>(w), m, n, packs, pa,
                                cfg.packs_per_thread, cfg.threads);
}

template <typename T, Prologue kPro = Prologue::kNone>
void dispatch(const Epilogue& e, const void* x, const void* w, int m, int n, int packs, int sm_count,
              cudaStream_t stream, const PrologueArgs& pa = {}) {
  // Two row tiles per warp, when the grid still covers every SM once: for many tokens they halve x's L1
  // traffic per byte of w; for FP8 at any m they give a block bf16's bytes. An e4m3 row is half a bf16 row's
  // bytes, so at k = 4096 one tile's 8 chunks meet 8 warps one chunk each and no warp overlaps a second
  // chunk's loads with the first's mmas (the FP8 gemv streamed ~2.5 TB/s on an H100 that way, round 10);
  // with two tiles a chunk is half as many packs, and every warp double-buffers two, as bf16 does.
  constexpr bool kFp8 = std::is_same_v<T, Fp8Codes> || std::is_same_v<T, Fp8Half>;
  const bool two_tiles =
      (m > 8 || kFp8) && (static_cast<int64_t>(n) + 2 * kTileRows - 1) / (2 * kTileRows) >= sm_count;
  if constexpr (kPro != Prologue::kNone) {
    // Fused, one row tile: a grid of at most two blocks an SM takes the tiles in turn, so with two q|k|v
    // (n = 6,144: 384 two-tile blocks on 264) ran a second round 45% full. The Fp8Half kernel's warps then meet one
    // chunk of k each at k = 4096, but the next tile's first chunk is already in flight (the fused loop above):
    // round 21 on an H100 timed batch 1 FP8 at 0.5272 -> 0.5195 s with one tile, 0.5148 -> 0.4999 s pipelined.
    return launch<T, false, 1, kPro>(e, x, w, m, n, packs, sm_count, stream, pa);  // m <= kGemvFusedMaxRows
  } else if (m <= 8) {
    if constexpr (kFp8) {
      if (two_tiles) return launch<T, false, 2>(e, x, w, m, n, packs, sm_count, stream);
    }
    launch<T, false, 1>(e, x, w, m, n, packs, sm_count, stream);
  } else if (two_tiles) {
    launch<T, true, 2>(e, x, w, m, n, packs, sm_count, stream);
  } else {
    launch<T, true, 1>(e, x, w, m, n, packs, sm_count, stream);
  }
}

// Whether fp8_gemv_cuda takes the Fp8Half kernel: m <= 8 and x's halves fit the fused kernels' shared memory.
// CONVEYOR_FP8_GEMV_HALF=0 keeps the Fp8Codes kernel (to compare them).
bool fp8_gemv_half_takes(int64_t m, int64_t k) {
  static const bool off = [] {
    const char* v = std::getenv("CONVEYOR_FP8_GEMV_HALF");
    return v != nullptr && std::string(v) == "0";
  }();
  return !off && m <= 8 && static_cast<size_t>(m * k) * 2 <= kGemvFusedMaxBytes;
}

// The checks both entry points share; returns the device's SM count.
int check_launch(const char* fn, const void* y, const void* x, const void* w, int64_t m, int64_t n, int64_t k,
                 int pack, int min_cc, const char* needs) {
  CONVEYOR_CHECK(m >= 1 && m <= kGemvMaxRows && n >= 1 && n <= 0x7fffffff && k >= pack && k <= 0x7fffffff, fn,
                 ": bad shape m=", m, " n=", n, " k=", k, " (need 1 <= m <= ", kGemvMaxRows, ", 1 <= n, ", pack,
                 " <= k < 2^31; use GemmRunner for larger m)");
  CONVEYOR_CHECK(k % pack == 0, fn, ": k=", k, " is not a multiple of ", pack,
                 "; rows of x and w must be whole 16-byte packs");
  CONVEYOR_CHECK(y != nullptr && x != nullptr && w != nullptr, fn, ": null device pointer (y, x or w)");
  CONVEYOR_CHECK(is_aligned16(x) && is_aligned16(w), fn, ": x (", x, ") and w (", w,
                 ") must be 16-byte aligned; offset views by multiples of 16 bytes");
  int device = 0, major = 0, minor = 0, sm_count = 0;
  CONVEYOR_CUDA_CHECK(cudaGetDevice(&device));
  CONVEYOR_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CONVEYOR_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  CONVEYOR_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
  CONVEYOR_CHECK(major * 10 + minor >= min_cc, fn, ": device ", device, " has compute capability ", major, ".", minor,
                 "; the kernel needs ", needs);
  return sm_count;
}

}  // namespace

void gemv_cuda(void* y, DType out, const void* x, const void* w, const void* bias, int64_t m, int64_t n, int64_t k,
               bool accumulate, DType dt, cudaStream_t stream) {
  CONVEYOR_CHECK(dt == DType::kBF16 || dt == DType::kF16, "gemv_cuda: input dtype ", dtype_name(dt),
                 " is not supported; x, w and bias must be bf16 or f16");
  CONVEYOR_CHECK(out == dt || out == DType::kF32, "gemv_cuda: output dtype ", dtype_name(out), " with inputs in ",
                 dtype_name(dt), "; the output must be ", dtype_name(dt), " or f32");
  const int sm_count = check_launch("gemv_cuda", y, x, w, m, n, k, Elem<__half>::kPack, 80,
                                    "bf16/f16 tensor-core mma (8.0 or newer): use GemmRunner (cuBLASLt)");
  const Epilogue e{y, out, bias, dt, nullptr, nullptr, accumulate};
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), packs = static_cast<int>(k / Elem<__half>::kPack);
  if (dt == DType::kBF16) {
    dispatch<__nv_bfloat16>(e, x, w, mi, ni, packs, sm_count, stream);
  } else {
    dispatch<__half>(e, x, w, mi, ni, packs, sm_count, stream);
  }
  CONVEYOR_CUDA_CHECK(cudaGetLastError());
}

bool gemv_fused_takes(bool norm, int64_t m, int64_t n, int64_t k, DType dt) {
  if ((dt != DType::kBF16 && dt != DType::kF16) || m < 1 || m > kGemvFusedMaxRows || k % 8 != 0 || k < 8 ||
      static_cast<size_t>(m * k) * 2 > kGemvFusedMaxBytes || n < 1 || n > 0x7fffffff)
    return false;
  if (!norm) return true;
  // The norm's partial sums are rms_norm_cuda's only where the block has the threads it spreads a row over.
  int device = 0, sm_count = 0;
  CONVEYOR_CUDA_CHECK(cudaGetDevice(&device));
  CONVEYOR_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
  constexpr int kChunkPacks = WarpTile<__half, false, 1>::kChunkPacks;
  const int64_t packs = k / 8, blocks = (n + kTileRows - 1) / kTileRows;
  return cuda_detail::row_pack_fits(packs) &&
         launch_warps(blocks, (packs + kChunkPacks - 1) / kChunkPacks, sm_count) * 32 >=
             cuda_detail::row_pack_config(packs).threads;
}

namespace {
template <Prologue kPro>
void gemv_fused(const char* fn, void* y, DType out, const PrologueArgs& pa, const void* w, const void* bias, int64_t m,
                int64_t n, int64_t k, bool accumulate, DType dt, cudaStream_t stream) {
  CONVEYOR_CHECK(gemv_fused_takes(kPro == Prologue::kRmsNorm, m, n, k, dt), fn, ": m=", m, " n=", n, " k=", k, " in ",
                 dtype_name(dt), " is not taken (gemv_fused_takes): bf16/f16, m <= ", kGemvFusedMaxRows,
                 ", m x k x 2 <= ", kGemvFusedMaxBytes, " bytes");
  CONVEYOR_CHECK(out == dt || out == DType::kF32, fn, ": output dtype ", dtype_name(out), " with inputs in ",
                 dtype_name(dt));
  CONVEYOR_CHECK(pa.src != nullptr && cuda_detail::is_aligned16(pa.src) &&
                     (kPro != Prologue::kRmsNorm || (pa.norm_w != nullptr && cuda_detail::is_aligned16(pa.norm_w))),
                 fn, ": the input (and norm weight) must be non-null and 16-byte aligned");
  // x is checked as a stand-in pointer (the input): the kernel makes x in shared memory.
  const int sm_count = check_launch(fn, y, pa.src, w, m, n, k, Elem<__half>::kPack, 80,
                                    "bf16/f16 tensor-core mma (8.0 or newer): use the two ops");
  const Epilogue e{y, out, bias, dt, nullptr, nullptr, accumulate};
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), packs = static_cast<int>(k / Elem<__half>::kPack);
  if (dt == DType::kBF16) {
    dispatch<__nv_bfloat16, kPro>(e, nullptr, w, mi, ni, packs, sm_count, stream, pa);
  } else {
    dispatch<__half, kPro>(e, nullptr, w, mi, ni, packs, sm_count, stream, pa);
  }
  CONVEYOR_CUDA_CHECK(cudaGetLastError());
}
}  // namespace

void gemv_rms_norm_cuda(void* y, DType out, const void* x, const void* norm_w, float eps, const void* w,
                        const void* bias, int64_t m, int64_t n, int64_t k, bool accumulate, DType dt,
                        cudaStream_t stream) {
  CONVEYOR_CHECK(eps >= 0.f, "gemv_rms_norm_cuda: eps must be >= 0, got ", eps);
  PrologueArgs pa;
  pa.src = x, pa.norm_w = norm_w, pa.eps = eps;
  gemv_fused<Prologue::kRmsNorm>("gemv_rms_norm_cuda", y, out, pa, w, bias, m, n, k, accumulate, dt, stream);
}

void gemv_silu_mul_cuda(void* y, DType out, const void* gate_up, const void* w, const void* bias, int64_t m, int64_t n,
                        int64_t k, bool accumulate, DType dt, cudaStream_t stream) {
  PrologueArgs pa;
  pa.src = gate_up;
  gemv_fused<Prologue::kSiluMul>("gemv_silu_mul_cuda", y, out, pa, w, bias, m, n, k, accumulate, dt, stream);
}

void fp8_gemv_cuda(void* y, DType out, const uint8_t* x, const float* x_scale, const uint8_t* w, const float* w_scale,
                   const void* bias, DType bias_dt, int64_t m, int64_t n, int64_t k, bool accumulate,
                   cudaStream_t stream) {
  CONVEYOR_CHECK(out == DType::kBF16 || out == DType::kF16 || out == DType::kF32, "fp8_gemv_cuda: output dtype ",
                 dtype_name(out), "; expected bf16, f16 or f32");
  CONVEYOR_CHECK(bias == nullptr || bias_dt == out || bias_dt == DType::kF32, "fp8_gemv_cuda: bias in ",
                 dtype_name(bias_dt), " with output ", dtype_name(out),
                 "; the bias must be in the output dtype or f32");
  CONVEYOR_CHECK(x_scale != nullptr && w_scale != nullptr, "fp8_gemv_cuda: null scales (x_scale or w_scale)");
  const int sm_count = check_launch("fp8_gemv_cuda", y, x, w, m, n, k, Elem<Fp8Codes>::kPack, 89,
                                    "e4m3 tensor-core mma (8.9 or newer): use Fp8GemmRunner (cuBLASLt)");
  const Epilogue e{y, out, bias, bias_dt, x_scale, w_scale, accumulate};
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), packs = static_cast<int>(k / Elem<Fp8Codes>::kPack);
  if (fp8_gemv_half_takes(m, k)) {
    PrologueArgs pa;
    pa.src = x;
    dispatch<Fp8Half, Prologue::kFp8Half>(e, nullptr, w, mi, ni, packs, sm_count, stream, pa);
  } else {
    dispatch<Fp8Codes>(e, x, w, mi, ni, packs, sm_count, stream);
  }
  CONVEYOR_CUDA_CHECK(cudaGetLastError());
}

}  // namespace conveyor
