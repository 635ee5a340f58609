// Hopper's warpgroup MMA (wgmma, sm_90a) and shared-memory barriers (mbarrier), as the prefill attention
// kernels use them: the 128-byte-swizzled tile layout and its matrix descriptors, the fences and waits, the
// m64n64k16 / m64n128k16 products with 16-bit operands (A from shared memory or from registers), and the
// arrive / wait of an mbarrier a producer warp and consumer warpgroups share. Device code of the sm_90a build
// only (CONVEYOR_WGMMA).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define CONVEYOR_WGMMA 1
#endif

namespace conveyor::cuda_detail {

#if defined(CONVEYOR_WGMMA)
__device__ __forceinline__ uint32_t smem_addr(const void* p) {  // the shared-window address of p
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// The first 1,024-byte boundary at or after p in shared memory (the swizzle atoms' alignment; a kernel's
// dynamic shared memory asks for 1,024 more bytes than its tiles to afford it).
__device__ __forceinline__ uint16_t* align_atoms(uint16_t* p) {
  const uint32_t base = smem_addr(p);
  return p + ((base + 1023) / 1024 * 1024 - base) / 2;
}

// A shared-memory matrix descriptor for the 128-byte swizzle: start address, LBO and SBO in 16-byte units.
// K-major operands (Q, K): SBO the next 8 rows (1,024 bytes), LBO unused. MN-major (V): LBO the next 64
// columns (a half), SBO the next 8 rows.
__device__ __forceinline__ uint64_t smem_desc(const void* p, uint32_t lbo, uint32_t sbo) {
  const uint32_t addr = smem_addr(p);
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

// An mbarrier in shared memory (8 bytes), by its shared-memory address: initialized for `count` arrivals per
// phase; waited for by the parity of the phase (0 for phases 0, 2, ...).
__device__ __forceinline__ void mbar_init(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {  // release: this thread's earlier writes first
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(smem_addr(bar)) : "memory");
}
// An arrival that comes when this thread's cp.async copies so far have landed (counted in the init count).
__device__ __forceinline__ void mbar_arrive_cp_async(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred done;\nwait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}
// A barrier among the `threads` threads (a multiple of 32) that name barrier `id` (0 is __syncthreads'):
// named_barrier waits for all of them; named_barrier_arrive counts this warp in and goes on.
__device__ __forceinline__ void named_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

#endif  // CONVEYOR_WGMMA

}  // namespace conveyor::cuda_detail
