// Prefill-chunk attention on Hopper's warpgroup MMA (wgmma, sm_90a), the same contract as the mma.sync
// kernel of attention_prefill.cu (the runtime's choice; this one runs where asked for). One CTA: 128 query rows of one
// sequence and one query head, two warpgroups of 64 rows. Q, K and V tiles sit in shared memory in the
// canonical no-swizzle layout (core matrices of 8 rows x 16 bytes, 128 contiguous bytes each), so
// S = Q K^T reads both operands straight from shared memory, and O += P V takes P from registers (the S
// accumulators, packed to 16 bits) and V from shared memory as an MN-major operand; nothing goes through
// ldmatrix. K/V tiles of 64 positions travel by cp.async into three buffers, two tiles ahead of the one
// computed (one barrier per tile); the block-table entries a tile further. Masks, the online softmax and
// the output are attention_prefill_tile.cuh's.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

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
constexpr int kStages = 3;                 // K/V tile buffers (two tiles travel while one computes)

// Set by the device code the driver loaded: 1 when it is the wgmma build (sm_90a), so the host knows
// whether this kernel exists on the current GPU.
#if defined(CONVEYOR_WGMMA)
__device__ int g_wgmma_built = 1;
#else
__device__ int g_wgmma_built = 0;
#endif

#if defined(CONVEYOR_WGMMA)  // the device code of the sm_90a build
// A shared-memory matrix descriptor, no swizzle: start address, LBO (the next core matrix along K) and
// SBO (the next one along M or N), each in 16-byte units.
__device__ __forceinline__ uint64_t smem_desc(const void* p, uint32_t lbo, uint32_t sbo) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(lbo >> 4) << 16) |
         (static_cast<uint64_t>(sbo >> 4) << 32);
}

// The canonical tile layout of rows x D 16-bit elements: 16-byte piece c of row r at
// ((r / 8) * (D / 8) + c) * 128 + (r % 8) * 16 bytes. Piece index i = that offset / 16, so consecutive
// threads write consecutive 16-byte pieces (no bank conflicts): row (i / D) * 8 + i % 8, piece (i / 8) % (D / 8).
template <int D>
struct Canonical {
  static __device__ __forceinline__ int row(int i) { return (i / D) * 8 + i % 8; }
  static __device__ __forceinline__ int col(int i) { return ((i / 8) % (D / 8)) * 8; }
  static constexpr uint32_t kRowGroupBytes = D * 16;  // 8 rows
};
constexpr int kCore = 64;  // elements of one core matrix (8 rows x 16 bytes)

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
// the canonical layout: a 16-bit cache by cp.async (the caller commits), an FP8 one converted through registers.
template <typename T, typename KV, int D>
__device__ __forceinline__ void load_kv_tile(uint16_t* dst, const KV* cache, const long long* rows, int kvh) {
  const KV* head = cache + static_cast<long long>(kvh) * D;
#pragma unroll
  for (int j = 0; j < kKeys * D / 8 / kThreads; ++j) {
    const int i = j * kThreads + static_cast<int>(threadIdx.x);
    const long long row = rows[Canonical<D>::row(i)];
    const KV* src = head + Canonical<D>::col(i) + (row >= 0 ? row : 0);
    if constexpr (sizeof(KV) == 2) {
      cp_async16(dst + i * 8, src, row >= 0);
    } else {
      *reinterpret_cast<uint4*>(dst + i * 8) = row >= 0 ? load8_as<T>(src) : make_uint4(0, 0, 0, 0);
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
    const int r = Canonical<D>::row(i);
    const bool ok = row0 + r < qlen;
    const long long off = ok ? (static_cast<long long>(q0 + row0 + r) * a.n_heads + head) * D + Canonical<D>::col(i) : 0;
    cp_async16(q_s + i * 8, qp + off, ok);
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

// One tile for a warpgroup whose rows it touches: S = Q K^T from shared memory, masks and the online
// softmax in registers, O += P V. Each product is waited for where it ends: an O += P V left running into
// the next tile makes ptxas serialize every wgmma (it sees the softmax rescale define the accumulators);
// the two warpgroups overlap each other's softmax and products instead.
template <typename T, int D>
__device__ __forceinline__ void attend_tile(float (&o)[D / 8][4], float (&m)[2], float (&l)[2], const uint16_t* q_g,
                                            const uint16_t* k_s, const uint16_t* v_s, const RowRanges<1>& r, int k0,
                                            float scale_log2) {
  constexpr uint32_t kGroupBytes = Canonical<D>::kRowGroupBytes;
  float s[kKeys / 8][4];  // the first k-step overwrites (accumulate 0)
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {  // head dims 16 kk .. + 16: two core matrices along K
    wgmma_ss_n64<T>(s, smem_desc(q_g + kk * 2 * kCore, 128, kGroupBytes),
                    smem_desc(k_s + kk * 2 * kCore, 128, kGroupBytes), kk);
  }
  wgmma_commit();
  wgmma_wait<0>();
  fence_regs<kKeys / 8>(s);
  if (k0 >= r.whole_first && k0 + kKeys - 1 <= r.whole_last) {  // uniform over the warp
    scale_mask<false>(s, r, 0, k0, scale_log2);
  } else {
    scale_mask<true>(s, r, 0, k0, scale_log2);
  }
  softmax_update<D>(s, o, m, l);
  uint32_t p[kKeys / 16][4];  // P as the A fragments of the four k-steps over the tile's keys
#pragma unroll
  for (int kk = 0; kk < kKeys / 16; ++kk) {
    p[kk][0] = pack2<T>(s[2 * kk][0], s[2 * kk][1]);
    p[kk][1] = pack2<T>(s[2 * kk][2], s[2 * kk][3]);
    p[kk][2] = pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    p[kk][3] = pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
  }
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kKeys / 16; ++kk) {  // keys 16 kk .. + 16: two core matrices along K (V is MN-major)
    wgmma_rs<T, D>(o, p[kk], smem_desc(v_s + kk * 2 * (kGroupBytes / 2), kGroupBytes, 128));
  }
  wgmma_commit();
  wgmma_wait<0>();
  fence_regs<D / 8>(o);
}
#endif  // CONVEYOR_WGMMA

template <int D>
constexpr int smem_bytes() {
  return (kRows + 2 * kStages * kKeys) * D * static_cast<int>(sizeof(uint16_t));  // Q, then K and V per stage
}

template <typename T, typename KV, int D>
__global__ void __launch_bounds__(kThreads, 1) wgmma_prefill_kernel(PagedAttentionArgs a) {
#if defined(CONVEYOR_WGMMA)
  constexpr int kTile = kKeys * D;
  extern __shared__ __align__(128) uint16_t smem[];  // Q, then (K, V) of stage 0, 1, 2
  uint16_t* q_s = smem;
  uint16_t* kv_s = smem + kRows * D;

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
  // Tile j lands in stage j % 3, two tiles ahead of the one computed; the pool offsets of its positions
  // sit in rows_s[j % 3], read from the block table three tiles ahead.
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
  if (t < kKeys) {
#pragma unroll
    for (int j = 0; j < kStages; ++j) {
      const int p = r.cta_first + j * kKeys + t;
      rows_s[j][t] = row_offset(a, table_entry(table, a, p, r.cta_last), p, D);
    }
  }
  __syncthreads();
  load(0);  // with Q
  load(1);
  for (int k0 = r.cta_first, j = 0; k0 <= r.cta_last; k0 += kKeys, ++j) {
    cp_async_wait<1>();  // tile j (and the first time Q) has landed for this thread; tile j + 1 may travel
    fence_async_smem();
    __syncthreads();  // ... for every thread, and every warpgroup is done with tile j - 1's stage
    load(j + 2);
    const int p3 = k0 + 3 * kKeys + t;  // tile j + 3: its table entry travels while this tile computes
    const int entry = t < kKeys ? table_entry(table, a, p3, r.cta_last) : -1;
    if (k0 <= gr.y && k0 + kKeys - 1 >= gr.x) {  // uniform over the warpgroup
      const uint16_t* k_s = kv_s + 2 * (j % kStages) * kTile;
      attend_tile<T, D>(o, m, l, q_s + group * kGroupRows * D, k_s, k_s + kTile, r, k0, a.scale_log2);
    }
    if (t < kKeys) rows_s[j % kStages][t] = row_offset(a, entry, p3, D);  // tile j's offsets are used up
  }
  store_rows<T, D>(a, o, l, r.pos[0], q0 + row0 + warp_row, head);
#else
  (void)a;
  __trap();  // not the sm_90a build: launch_wgmma_prefill is never called then
#endif
}

struct Kernel {  // for prefill::Launch; smem over 48 KiB at D 128
  static constexpr int kBlock = kThreads;
  template <int D> static constexpr int smem() { return smem_bytes<D>(); }
  template <typename T, typename KV, int D> static auto fn() { return wgmma_prefill_kernel<T, KV, D>; }
};

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
  Launch<Kernel> launch{a, prefill_grid(a, max_query_len, kRows), s};
  dispatch(a, dt, launch);
}

}  // namespace conveyor::cuda_detail
