// Prefill-chunk attention on Hopper's warpgroup MMA (wgmma, sm_90a): the runtime's choice wherever this code
// runs, with the same contract as the mma.sync kernel of attention_prefill.cu. One CTA: 128 query
// rows of one sequence and one query head, two warpgroups of 64 rows. Q, K and V tiles sit in shared memory
// in wgmma's 128-byte-swizzled layout, so S = Q K^T reads both operands straight from shared memory, and
// O += P V takes P from registers (the S accumulators, packed to 16 bits) and V from shared memory as an
// MN-major operand; nothing goes through ldmatrix. K/V tiles of 64 positions travel by cp.async into four
// buffers, two tiles ahead of the one computed (one barrier per tile); the block-table entries further
// ahead. How products and softmax interleave is a Schedule (CONVEYOR_WGMMA_SCHEDULE). Masks, the online
// softmax and the output are attention_prefill_tile.cuh's.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdlib>
#include <string>
#include <type_traits>

#include "kernels/cuda/attention_device.cuh"
#include "kernels/cuda/attention_prefill_tile.cuh"
#include "runtime/core/cuda_check.h"
#include "runtime/core/error.h"

namespace conveyor::cuda_detail {
namespace {

using namespace prefill;  // NOLINT: the shared tile pieces

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define CONVEYOR_WGMMA 1
#endif

constexpr int kGroups = 2;                 // warpgroups per CTA
constexpr int kGroupRows = 64;             // query rows per warpgroup (wgmma's M)
constexpr int kRows = kGroups * kGroupRows;
constexpr int kThreads = 128 * kGroups;
constexpr int kStages = 4;                 // K/V tile buffers: two tiles travel while one computes (and kOverlap's
                                           // previous tile's V is still read)
constexpr int kAhead = 2;                  // tiles loaded ahead of the one computed

// How the warpgroups order their products and softmax (CONVEYOR_WGMMA_SCHEDULE; raced by attention_bench):
// kSync: each product waited for where it ends (an O += P V left running into a softmax that rescales O
//   makes ptxas serialize every wgmma);
// kOverlap: a warpgroup issues tile j's S = Q K^T and tile j - 1's O += P V together, runs tile j's
//   softmax while O += P V runs, and waits for it only to rescale O (four K/V stages: tile j - 1's V is
//   still read while tile j + 2 loads);
// kOverlapQreg: kOverlap with Q's A fragments held in registers (S = Q K^T then reads only K from shared
//   memory: at 64 keys a both-operands-in-shared m64n64k16 reads 4 KB in its 32 tensor-core cycles, all of
//   an SM's 128 bytes per cycle).
// Round 7 also raced two schedules with the warpgroups staggered by named barriers (pingpong, 260 TFLOP/s
// at 8k; overlap_pingpong, 288, against overlap's 297): the per-tile barrier keeps them in step already.
enum Schedule { kSync = 0, kOverlap = 1, kOverlapQreg = 2 };

// Set by the device code the driver loaded: 1 when it is the wgmma build (sm_90a), so the host knows
// whether this kernel exists on the current GPU.
#if defined(CONVEYOR_WGMMA)
__device__ int g_wgmma_built = 1;
#else
__device__ int g_wgmma_built = 0;
#endif

#if defined(CONVEYOR_WGMMA)  // the device code of the sm_90a build
// A shared-memory matrix descriptor for the 128-byte swizzle: start address, LBO and SBO in 16-byte units.
// K-major operands (Q, K): SBO the next 8 rows (1,024 bytes), LBO unused. MN-major (V): LBO the next 64
// columns (a half), SBO the next 8 rows.
__device__ __forceinline__ uint64_t smem_desc(const void* p, uint32_t lbo, uint32_t sbo) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(lbo >> 4) << 16) |
         (static_cast<uint64_t>(sbo >> 4) << 32) | (1ull << 62);
}

// The 128-byte-swizzled layout of an R x D tile of 16-bit elements (wgmma's canonical SW128 layout; the
// same bytes serve as a K-major operand for Q and K and an MN-major one for V): the D columns in halves of
// 64 (128 bytes), each half R rows of 128 bytes, 16-byte chunk c of row r at chunk position c ^ (r % 8)
// (8-row atoms of 1,024 bytes; tiles start on a 1,024-byte boundary). Piece i (16 bytes) of a tile is
// chunk i % 8 of row (i / 8) % R in half i / (8 R), so 8 consecutive threads fill one 128-byte row.
template <int R>
struct Swizzled {
  static __device__ __forceinline__ int row(int i) { return (i / 8) % R; }
  static __device__ __forceinline__ int col(int i) { return (i / (8 * R)) * 64 + (i % 8) * 8; }
  static __device__ __forceinline__ int at(int r, int c) {  // element (r, c), in elements
    return (c / 64) * (R * 64) + r * 64 + (((c % 64) / 8) ^ (r % 8)) * 8 + c % 8;
  }
  static __device__ __forceinline__ int offset(int i) { return at(row(i), col(i)); }
};
constexpr uint32_t kAtomBytes = 1024;  // 8 rows of 128 bytes

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
// After writes through the generic proxy (cp.async, st.shared), before wgmma reads them (async proxy).
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// Keeps the compiler from reading (or moving) accumulators before the wgmma that writes them is waited for.
template <int N>
__device__ __forceinline__ void fence_regs(float (&r)[N][4]) {
#pragma unroll
  for (int n = 0; n < N; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(r[n][e])::"memory");
}

#define CV_ACC4(d, n) "+f"(d[n][0]), "+f"(d[n][1]), "+f"(d[n][2]), "+f"(d[n][3])
#define CV_ACC32(d) \
  CV_ACC4(d, 0), CV_ACC4(d, 1), CV_ACC4(d, 2), CV_ACC4(d, 3), CV_ACC4(d, 4), CV_ACC4(d, 5), CV_ACC4(d, 6), CV_ACC4(d, 7)
#define CV_ACC32_HI(d)                                                                                          \
  CV_ACC4(d, 8), CV_ACC4(d, 9), CV_ACC4(d, 10), CV_ACC4(d, 11), CV_ACC4(d, 12), CV_ACC4(d, 13), CV_ACC4(d, 14), \
      CV_ACC4(d, 15)
#define CV_REGS32                                                                                                 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, " \
  "%24, %25, %26, %27, %28, %29, %30, %31}"
#define CV_REGS64                                                                                                 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, " \
  "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, "  \
  "%46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"

// d (64 x 64, fp32) (+)= A (64 x 16, shared, K-major) * B (16 x 64, shared, K-major); accumulate = 0 overwrites.
#define CV_WGMMA_SS_N64(TY)                                                                                \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                               \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " " CV_REGS32 ", %32, %33, p, 1, 1, 0, 0;\n}\n" \
               : CV_ACC32(d)                                                                              \
               : "l"(a), "l"(b), "r"(accumulate))
template <typename T>
__device__ __forceinline__ void wgmma_ss_n64(float (&d)[8][4], uint64_t a, uint64_t b, int accumulate) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) CV_WGMMA_SS_N64("bf16");
  else CV_WGMMA_SS_N64("f16");
}

// d (64 x 64, fp32) (+)= A (64 x 16, registers: the m16n8k16 A fragment of the lane's warp rows) * B (16 x 64,
// shared, K-major); accumulate = 0 overwrites.
#define CV_WGMMA_RS_N64_KMAJOR(TY)                                                                        \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                              \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " " CV_REGS32                     \
               ", {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"                                          \
               : CV_ACC32(d)                                                                             \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate))
template <typename T>
__device__ __forceinline__ void wgmma_rs_n64_kmajor(float (&d)[8][4], const uint32_t (&a)[4], uint64_t b,
                                                    int accumulate) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) CV_WGMMA_RS_N64_KMAJOR("bf16");
  else CV_WGMMA_RS_N64_KMAJOR("f16");
}

// d (64 x N, fp32) += A (64 x 16, registers: the m16n8k16 A fragment of the lane's warp rows) * B (16 x N,
// shared, MN-major).
#define CV_WGMMA_RS_N64(TY)                                                                               \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                                \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " " CV_REGS32                     \
               ", {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"                                          \
               : CV_ACC32(d)                                                                             \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b))
#define CV_WGMMA_RS_N128(TY)                                                                              \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                                \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " " CV_REGS64                    \
               ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"                                          \
               : CV_ACC32(d), CV_ACC32_HI(d)                                                             \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b))
template <typename T, int D>
__device__ __forceinline__ void wgmma_rs(float (&d)[D / 8][4], const uint32_t (&a)[4], uint64_t b) {
  constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;
  if constexpr (D == 64) {
    if constexpr (kBf16) CV_WGMMA_RS_N64("bf16");
    else CV_WGMMA_RS_N64("f16");
  } else {
    if constexpr (kBf16) CV_WGMMA_RS_N128("bf16");
    else CV_WGMMA_RS_N128("f16");
  }
}

// Starts loading one K or V tile (kKeys positions at the pool offsets rows[], zeros where -1) into dst in
// the swizzled layout: a 16-bit cache by cp.async (the caller commits), an FP8 one converted through registers.
template <typename T, typename KV, int D>
__device__ __forceinline__ void load_kv_tile(uint16_t* dst, const KV* cache, const long long* rows, int kvh) {
  const KV* head = cache + static_cast<long long>(kvh) * D;
#pragma unroll
  for (int j = 0; j < kKeys * D / 8 / kThreads; ++j) {
    const int i = j * kThreads + static_cast<int>(threadIdx.x);
    const long long row = rows[Swizzled<kKeys>::row(i)];
    const KV* src = head + Swizzled<kKeys>::col(i) + (row >= 0 ? row : 0);
    uint16_t* d = dst + Swizzled<kKeys>::offset(i);
    if constexpr (sizeof(KV) == 2) {
      cp_async16(d, src, row >= 0);
    } else {
      *reinterpret_cast<uint4*>(d) = row >= 0 ? load8_as<T>(src) : make_uint4(0, 0, 0, 0);
    }
  }
}

// Starts loading the CTA's Q tile (rows row0 .. + kRows of query head `head`, zeros past the chunk).
template <int D>
__device__ __forceinline__ void load_q(uint16_t* q_s, const PagedAttentionArgs& a, int q0, int qlen, int row0,
                                       int head) {
  const uint16_t* qp = static_cast<const uint16_t*>(a.q);
#pragma unroll
  for (int j = 0; j < kRows * D / 8 / kThreads; ++j) {
    const int i = j * kThreads + static_cast<int>(threadIdx.x);
    const int r = Swizzled<kRows>::row(i);
    const bool ok = row0 + r < qlen;
    const long long off = ok ? (static_cast<long long>(q0 + row0 + r) * a.n_heads + head) * D + Swizzled<kRows>::col(i) : 0;
    cp_async16(q_s + Swizzled<kRows>::offset(i), qp + off, ok);
  }
}

// The warpgroup's key range (union of its rows'), from the warps' ranges.
__device__ __forceinline__ int2 group_range(const RowRanges<1>& r) {
  __shared__ int range_s[kGroups][2];
  const int group = threadIdx.x / 128;
  if (threadIdx.x % 128 == 0) range_s[group][0] = 0x7fffffff, range_s[group][1] = -1;
  __syncthreads();
  if (threadIdx.x % 32 == 0 && r.warp_first <= r.warp_last) {
    atomicMin(&range_s[group][0], r.warp_first);
    atomicMax(&range_s[group][1], r.warp_last);
  }
  __syncthreads();
  return make_int2(range_s[group][0], range_s[group][1]);
}

// Issues S = Q K^T of the warpgroup's 64 rows (q_g: its first row in Q's first half) and the tile's keys,
// both operands from shared memory (head dims 16 kk .. + 16: half kk / 4, 32 bytes further per step).
template <typename T, int D>
__device__ __forceinline__ void issue_scores(float (&s)[kKeys / 8][4], const uint16_t* q_g, const uint16_t* k_s) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const int col = (kk % 4) * 16;
    wgmma_ss_n64<T>(s, smem_desc(q_g + (kk / 4) * kRows * 64 + col, 16, kAtomBytes),
                    smem_desc(k_s + (kk / 4) * kKeys * 64 + col, 16, kAtomBytes), kk);
  }
  wgmma_commit();
}

// Issues O += P V, V an MN-major operand from shared memory (keys 16 kk .. + 16: two 8-row atoms further).
template <typename T, int D>
__device__ __forceinline__ void issue_pv(float (&o)[D / 8][4], const uint32_t (&p)[kKeys / 16][4], const uint16_t* v_s) {
#pragma unroll
  for (int kk = 0; kk < kKeys / 16; ++kk) {
    wgmma_rs<T, D>(o, p[kk], smem_desc(v_s + kk * 16 * 64, kKeys * 128, kAtomBytes));
  }
  wgmma_commit();
}

// Masks the scores (kMask where some row of the warp does not see the whole tile) in log2 units.
__device__ __forceinline__ void group_mask(float (&s)[kKeys / 8][4], const RowRanges<1>& r, int k0, float scale_log2) {
  if (k0 >= r.whole_first && k0 + kKeys - 1 <= r.whole_last) {  // uniform over the warp
    scale_mask<false>(s, r, 0, k0, scale_log2);
  } else {
    scale_mask<true>(s, r, 0, k0, scale_log2);
  }
}

// P packed as the A fragments of the four k-steps over the tile's keys.
template <typename T>
__device__ __forceinline__ void pack_p(const float (&s)[kKeys / 8][4], uint32_t (&p)[kKeys / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < kKeys / 16; ++kk) {
    p[kk][0] = pack2<T>(s[2 * kk][0], s[2 * kk][1]);
    p[kk][1] = pack2<T>(s[2 * kk][2], s[2 * kk][3]);
    p[kk][2] = pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    p[kk][3] = pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
  }
}

// One tile for one warpgroup under kSync (`touch`: the tile touches its rows).
template <typename T, int D>
__device__ __forceinline__ void attend_tile(bool touch, float (&o)[D / 8][4], float (&m)[2], float (&l)[2],
                                            const uint16_t* q_g, const uint16_t* k_s, const uint16_t* v_s,
                                            const RowRanges<1>& r, int k0, float scale_log2) {
  if (!touch) return;
  float s[kKeys / 8][4];  // the first k-step overwrites (accumulate 0)
  uint32_t p[kKeys / 16][4];
  wgmma_fence();
  issue_scores<T, D>(s, q_g, k_s);
  wgmma_wait<0>();
  fence_regs<kKeys / 8>(s);
  group_mask(s, r, k0, scale_log2);
  softmax_update<D>(s, o, m, l);
  pack_p<T>(s, p);
  wgmma_fence();
  issue_pv<T, D>(o, p, v_s);
  wgmma_wait<0>();
  fence_regs<D / 8>(o);
}

// kOverlapQreg: the lane's A fragments of Q (the warp's 16 rows from `warp_row` of the CTA's, head dims
// 16 kk .. + 16), read once from the swizzled Q tile: registers 0 and 2 row g, 1 and 3 row g + 8; 0 and 1
// dims 2 tq, 2 and 3 dims 8 + 2 tq (pack_p's order).
template <int D>
__device__ __forceinline__ void load_q_frags(uint32_t (&qf)[D / 16][4], const uint16_t* q_s, int warp_row) {
  const int g = (threadIdx.x % 32) / 4, tq = threadIdx.x % 4;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = warp_row + g + 8 * (i & 1), col = 16 * kk + 8 * (i >> 1) + 2 * tq;
      qf[kk][i] = *reinterpret_cast<const uint32_t*>(q_s + Swizzled<kRows>::at(row, col));
    }
}

// Issues S = Q K^T with Q from registers (K as issue_scores reads it).
template <typename T, int D>
__device__ __forceinline__ void issue_scores_rs(float (&s)[kKeys / 8][4], const uint32_t (&qf)[D / 16][4],
                                                const uint16_t* k_s) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    wgmma_rs_n64_kmajor<T>(s, qf[kk], smem_desc(k_s + (kk / 4) * kKeys * 64 + (kk % 4) * 16, 16, kAtomBytes), kk);
  }
  wgmma_commit();
}

// kOverlap's state between tiles: P of the tile before and that tile's V, whose O += P V is issued beside
// the next tile's S = Q K^T. The first tile's "tile before" is P = 0 over its own V (adds exactly zero), and
// a warpgroup computes every tile of the CTA's range (one its rows do not see masks to P = 0): a branch
// around a wgmma, or a wait that depends on data, makes ptxas serialize them all (C7520).
struct PendingPv {
  uint32_t p[kKeys / 16][4];
  const uint16_t* v;
  __device__ __forceinline__ void clear(const uint16_t* first_v) {  // nothing before the first tile
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) p[kk][0] = p[kk][1] = p[kk][2] = p[kk][3] = 0u;
    v = first_v;
  }
};

template <typename T, int D>
__device__ __forceinline__ void finish_pv(float (&o)[D / 8][4], const PendingPv& pend) {
  wgmma_fence();
  issue_pv<T, D>(o, pend.p, pend.v);
  wgmma_wait<0>();
  fence_regs<D / 8>(o);
}

template <typename T, int D, bool kQreg>
__device__ __forceinline__ void attend_tile_overlap(PendingPv& pend, float (&o)[D / 8][4], float (&m)[2],
                                                    float (&l)[2], const uint16_t* q_g,
                                                    const uint32_t (&qf)[D / 16][4], const uint16_t* k_s,
                                                    const uint16_t* v_s, const RowRanges<1>& r, int k0,
                                                    float scale_log2) {
  float s[kKeys / 8][4];
  wgmma_fence();
  if constexpr (kQreg) {
    issue_scores_rs<T, D>(s, qf, k_s);
  } else {
    issue_scores<T, D>(s, q_g, k_s);
  }
  issue_pv<T, D>(o, pend.p, pend.v);
  wgmma_wait<1>();  // S; O += P V may still run
  fence_regs<kKeys / 8>(s);
  scale_mask<true>(s, r, 0, k0, scale_log2);
  float alpha[2];
  softmax_probs(s, m, l, alpha);
  wgmma_wait<0>();
  fence_regs<D / 8>(o);
  softmax_rescale<D>(o, alpha);
  pack_p<T>(s, pend.p);
  pend.v = v_s;
}
#endif  // CONVEYOR_WGMMA

template <int D>
constexpr int smem_bytes() {  // Q, then K and V per stage, and room to start on a 1,024-byte boundary
  return (kRows + 2 * kStages * kKeys) * D * static_cast<int>(sizeof(uint16_t)) + 1024;
}

template <typename T, typename KV, int D, int kSchedule>
__global__ void __launch_bounds__(kThreads, 1) wgmma_prefill_kernel(PagedAttentionArgs a) {
#if defined(CONVEYOR_WGMMA)
  constexpr int kTile = kKeys * D;
  extern __shared__ __align__(1024) uint16_t smem[];  // Q, then (K, V) of each stage
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  uint16_t* q_s = smem + ((base + 1023) / 1024 * 1024 - base) / 2;  // the swizzle atoms' alignment
  uint16_t* kv_s = q_s + kRows * D;

  CtaTile c;
  if (!c.locate(a, kRows)) return;
  const int head = c.head, kvh = c.kvh, seq = c.seq, q0 = c.q0, qlen = c.qlen, row0 = c.row0;
  const int group = threadIdx.x / 128;
  const int warp_row = group * kGroupRows + (threadIdx.x % 128) / 32 * 16;  // the warp's first row in the CTA's
  const RowRanges<1> r = row_ranges<1>(a, q0, qlen, row0 + warp_row);
  const int2 gr = group_range(r);

  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float m[2] = {kNegInf, kNegInf}, l[2] = {0.f, 0.f};  // l: this lane's partial row sums

  const int32_t* table = a.block_tables + static_cast<long long>(seq) * a.max_blocks;
  const KV* kc = static_cast<const KV*>(a.k_cache);
  const KV* vc = static_cast<const KV*>(a.v_cache);
  // Tile j lands in stage j % kStages, kAhead tiles ahead of the one computed; the pool offsets of its
  // positions sit in rows_s[j % kStages], read from the block table kStages tiles ahead.
  __shared__ long long rows_s[kStages][kKeys];
  const int t = threadIdx.x;
  auto load = [&](int j) {  // starts tile j's copies (an empty group past the range) and commits
    if (r.cta_first + j * kKeys <= r.cta_last) {
      uint16_t* k_s = kv_s + 2 * (j % kStages) * kTile;
      load_kv_tile<T, KV, D>(k_s, kc, rows_s[j % kStages], kvh);
      load_kv_tile<T, KV, D>(k_s + kTile, vc, rows_s[j % kStages], kvh);
    }
    cp_async_commit();
  };
  load_q<D>(q_s, a, q0, qlen, row0, head);
  cp_async_commit();  // Q in a group of its own, before the tiles'
  if (t < kKeys) {
#pragma unroll
    for (int j = 0; j < kStages; ++j) {
      const int p = r.cta_first + j * kKeys + t;
      rows_s[j][t] = row_offset(a, table_entry(table, a, p, r.cta_last), p, D);
    }
  }
  __syncthreads();
  for (int j = 0; j < kAhead; ++j) load(j);
  uint32_t qf[D / 16][4];  // kOverlapQreg: Q's A fragments
  if constexpr (kSchedule == kOverlapQreg) {
    cp_async_wait<kAhead>();  // Q has landed for this thread ...
    __syncthreads();          // ... and for every thread
    load_q_frags<D>(qf, q_s, warp_row);
  }
  PendingPv pend;
  pend.clear(kv_s + kTile);
  for (int k0 = r.cta_first, j = 0; k0 <= r.cta_last; k0 += kKeys, ++j) {
    cp_async_wait<kAhead - 1>();  // tile j (and before it Q) has landed for this thread
    fence_async_smem();
    __syncthreads();  // ... for every thread, and every warpgroup is done with the stage tile j + kAhead takes
    load(j + kAhead);
    const int pn = k0 + kStages * kKeys + t;  // tile j + kStages: its table entry travels while this tile computes
    const int entry = t < kKeys ? table_entry(table, a, pn, r.cta_last) : -1;
    const uint16_t* k_s = kv_s + 2 * (j % kStages) * kTile;
    const uint16_t* q_g = q_s + group * kGroupRows * 64;
    if constexpr (kSchedule >= kOverlap) {
      attend_tile_overlap<T, D, kSchedule == kOverlapQreg>(pend, o, m, l, q_g, qf, k_s, k_s + kTile, r, k0,
                                                           a.scale_log2);
    } else {
      const bool touch = k0 <= gr.y && k0 + kKeys - 1 >= gr.x;  // uniform over the warpgroup
      attend_tile<T, D>(touch, o, m, l, q_g, k_s, k_s + kTile, r, k0, a.scale_log2);
    }
    if (t < kKeys) rows_s[j % kStages][t] = row_offset(a, entry, pn, D);  // tile j's offsets are used up
  }
  if constexpr (kSchedule >= kOverlap) finish_pv<T, D>(o, pend);
  store_rows<T, D>(a, o, l, r.pos[0], q0 + row0 + warp_row, head);
#else
  (void)a;
  __trap();  // not the sm_90a build: launch_wgmma_prefill is never called then
#endif
}

template <int kSchedule>
struct Kernel {  // for prefill::Launch; smem over 48 KiB
  static constexpr int kBlock = kThreads;
  template <int D> static constexpr int smem() { return smem_bytes<D>(); }
  template <typename T, typename KV, int D> static auto fn() { return wgmma_prefill_kernel<T, KV, D, kSchedule>; }
};

template <int kSchedule>
void launch_schedule(const PagedAttentionArgs& a, const dim3& grid, DType dt, cudaStream_t s) {
  Launch<Kernel<kSchedule>> launch{a, grid, s};
  dispatch(a, dt, launch);
}

// CONVEYOR_WGMMA_SCHEDULE: overlap (the default: the fastest at 2k-16k on round 7's H100, 297 TFLOP/s at 8k
// against sync's 292), sync or overlap_qreg (Schedule), read once per process.
int schedule_from_env() {
  const char* v = std::getenv("CONVEYOR_WGMMA_SCHEDULE");
  const std::string name = v == nullptr ? "" : v;
  if (name == "overlap" || name.empty()) return kOverlap;
  if (name == "sync") return kSync;
  if (name == "overlap_qreg") return kOverlapQreg;
  CONVEYOR_THROW("CONVEYOR_WGMMA_SCHEDULE='", name, "': expected overlap, sync or overlap_qreg");
}

}  // namespace

bool wgmma_prefill_built() {
  int dev = 0;
  CONVEYOR_CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  CONVEYOR_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  if (prop.major != 9 || prop.minor != 0) return false;  // sm_90a code runs on sm_90 only
  int built = 0;
  const cudaError_t e = cudaMemcpyFromSymbol(&built, g_wgmma_built, sizeof(int));
  if (e == cudaErrorNoKernelImageForDevice || e == cudaErrorInvalidDeviceFunction) {
    (void)cudaGetLastError();
    return false;
  }
  CONVEYOR_CUDA_CHECK(e);
  return built == 1;
}

void launch_wgmma_prefill(const PagedAttentionArgs& a, int max_query_len, DType dt, cudaStream_t s) {
  static const int schedule = schedule_from_env();
  const dim3 grid = prefill_grid(a, max_query_len, kRows);
  if (schedule == kOverlapQreg) {
    launch_schedule<kOverlapQreg>(a, grid, dt, s);
  } else if (schedule == kOverlap) {
    launch_schedule<kOverlap>(a, grid, dt, s);
  } else {
    launch_schedule<kSync>(a, grid, dt, s);
  }
}

}  // namespace conveyor::cuda_detail
