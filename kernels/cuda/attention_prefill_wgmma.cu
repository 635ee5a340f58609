// Prefill-chunk attention on Hopper's warpgroup MMA (wgmma, sm_90a): the runtime's choice wherever this code
// runs, with the same contract as the mma.sync kernel of attention_prefill.cu. One CTA: 128 query
// rows of one sequence and one query head, two warpgroups of 64 rows. Q, K and V tiles sit in shared memory
// in wgmma's 128-byte-swizzled layout, so S = Q K^T reads both operands straight from shared memory, and
// O += P V takes P from registers (the S accumulators, packed to 16 bits) and V from shared memory as an
// MN-major operand; nothing goes through ldmatrix. K/V tiles of 64 positions travel by cp.async into four
// stages. By default (the ws schedule) a third warpgroup only loads them (an FP8 cache's codes by cp.async into
// raw tiles, then converted) and hands each stage over by mbarriers, so the two computing warpgroups never meet
// at a CTA barrier; the other schedules load from the computing threads, two tiles ahead, with one barrier
// per tile. How products and softmax interleave is a Schedule (CONVEYOR_WGMMA_SCHEDULE). Masks, the online
// softmax and the output are attention_prefill_tile.cuh's.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdlib>
#include <string>
#include <type_traits>

#include "kernels/cuda/attention_device.cuh"
#include "kernels/cuda/attention_prefill_tile.cuh"
#include "kernels/cuda/wgmma.cuh"
#include "runtime/core/cuda_check.h"
#include "runtime/core/error.h"

namespace conveyor::cuda_detail {
namespace {

using namespace prefill;  // NOLINT: the shared tile pieces

constexpr int kGroups = 2;                 // warpgroups per CTA
constexpr int kGroupRows = 64;             // query rows per warpgroup (wgmma's M)
constexpr int kRows = kGroups * kGroupRows;
constexpr int kThreads = 128 * kGroups;
constexpr int kStages = 4;                 // K/V tile buffers: two tiles travel while one computes (and kOverlap's
                                           // previous tile's V is still read)
constexpr int kAhead = 2;                  // tiles loaded ahead of the one computed
constexpr int kProducers = 128;            // kWs: the producer warpgroup (one warp's cp.async land too slowly:
                                           // 185 TFLOP/s at 8k, the consumers waiting on half their samples)
constexpr int kWsThreads = kThreads + kProducers;
// kWs over an FP8 cache: a tile's codes land by cp.async in a raw (K, V) tile of their own (K's kKeys rows of D
// bytes, then V's) while the producer converts the tile before; converting straight from global memory stalled
// it on every load (115 TFLOP/s against 432 for bf16 at 8k; 330 so; 3 or 4 raw tiles ran no faster on an H100).
constexpr int kRawTiles = 2;
template <int D>
constexpr int raw_bytes() { return kRawTiles * 2 * kKeys * D; }

// How the warpgroups order their products and softmax (CONVEYOR_WGMMA_SCHEDULE; raced by attention_bench):
// kSync: each product waited for where it ends (an O += P V left running into a softmax that rescales O
//   makes ptxas serialize every wgmma);
// kOverlap: a warpgroup issues tile j's S = Q K^T and tile j - 1's O += P V together, runs tile j's
//   softmax while O += P V runs, and waits for it only to rescale O (four K/V stages: tile j - 1's V is
//   still read while tile j + 2 loads);
// Round 7 also raced two schedules with the warpgroups staggered by named barriers (pingpong, 260 TFLOP/s
// at 8k; overlap_pingpong, 288, against overlap's 297): the per-tile barrier keeps them in step already.
// kWs: kOverlap in a warp-specialized CTA: producer warps load the K/V tiles and
//   the consumer warpgroups only compute, stages handed over by mbarriers (full: landed; empty: both
//   warpgroups are done with it) instead of a CTA barrier per tile, so each warpgroup runs at its own pace
//   (Q in registers too would spill at head_dim 128: 384 threads leave 168 registers a thread);
// kWsPingpong: kWs with the two warpgroups taking turns to issue their products (named barriers), so one's
//   softmax runs while the other's products do (round 9, H100: passed the twin test, 398 TFLOP/s at 8k
//   against ws's 415 in the same call).
// Round 8 also raced overlap_qreg (kOverlap with Q's A fragments in registers): 311 TFLOP/s at 8k against
// ws's 432, and ws cannot afford those registers, so it was removed.
enum Schedule { kSync = 0, kOverlap = 1, kWs = 2, kWsPingpong = 3 };

// Set by the device code the driver loaded: 1 when it is the wgmma build (sm_90a), so the host knows
// whether this kernel exists on the current GPU.
#if defined(CONVEYOR_WGMMA)
__device__ int g_wgmma_built = 1;
#else
__device__ int g_wgmma_built = 0;
#endif

#if defined(CONVEYOR_WGMMA)  // the device code of the sm_90a build

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

// Masks the scores where some row of the warp does not see the whole tile (a branch uniform over the warp).
__device__ __forceinline__ void group_mask(float (&s)[kKeys / 8][4], const RowRanges<1>& r, int k0) {
  if (k0 < r.whole_first || k0 + kKeys - 1 > r.whole_last) mask_scores(s, r, 0, k0);
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
  group_mask(s, r, k0);
  softmax_update<D>(s, o, m, l, scale_log2);
  pack_p<T>(s, p);
  wgmma_fence();
  issue_pv<T, D>(o, p, v_s);
  wgmma_wait<0>();
  fence_regs<D / 8>(o);
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

// kTurns (kWsPingpong): the warpgroup waits for its turn (named barrier 2 + its index) before issuing and
// hands the turn to the other (2 + the other's index) after; consume sets up the first turn.
template <typename T, int D, bool kTurns = false>
__device__ __forceinline__ void attend_tile_overlap(PendingPv& pend, float (&o)[D / 8][4], float (&m)[2],
                                                    float (&l)[2], const uint16_t* q_g, const uint16_t* k_s,
                                                    const uint16_t* v_s, const RowRanges<1>& r, int k0,
                                                    float scale_log2) {
  float s[kKeys / 8][4];
  if constexpr (kTurns) named_barrier(2 + threadIdx.x / 128, kThreads);
  wgmma_fence();
  issue_scores<T, D>(s, q_g, k_s);
  issue_pv<T, D>(o, pend.p, pend.v);
  if constexpr (kTurns) named_barrier_arrive(3 - threadIdx.x / 128, kThreads);
  wgmma_wait<1>();  // S; O += P V may still run
  fence_regs<kKeys / 8>(s);
  group_mask(s, r, k0);
  float alpha[2];
  softmax_probs(s, m, l, alpha, scale_log2);
  wgmma_wait<0>();
  fence_regs<D / 8>(o);
  softmax_rescale<D>(o, alpha);
  pack_p<T>(s, pend.p);
  pend.v = v_s;
}

// kWs's producer thread t's rows of the tile at k0 when kLanes threads share a row: rows t / kLanes +
// (kProducers / kLanes) rr, the rows' block-table entries stepped from one division; f(rr, ok, the row's pool
// offset at kv head 0), ok false (offset 0) past `last`, past the table or for a block outside the pool.
template <int kLanes, int D, typename F>
__device__ __forceinline__ void for_producer_rows(const PagedAttentionArgs& a, const int32_t* table, int k0, int last,
                                                  F&& f) {
  constexpr int kStep = kProducers / kLanes;  // rows between a thread's rows
  const int t = static_cast<int>(threadIdx.x) - kThreads;
  int p = k0 + t / kLanes, idx = p / a.block_size, in_block = p % a.block_size;
#pragma unroll
  for (int rr = 0; rr < kKeys / kStep; ++rr, p += kStep, in_block += kStep) {
    while (in_block >= a.block_size) in_block -= a.block_size, ++idx;
    const int block = p <= last && idx < a.max_blocks ? __ldg(table + idx) : -1;
    const bool ok = block >= 0 && block < a.num_blocks;
    f(rr, ok, ok ? (static_cast<long long>(block) * a.block_size + in_block) * a.n_kv_heads * D : 0ll);
  }
}

// kWs over a 16-bit cache: the producer warps' cp.async copy of one K and V tile (positions k0 .. + kKeys, zeros
// past `last`) into a stage, 16-byte chunk t % 8 of each 64-column half of the thread's rows; the stage's full
// barrier gets the thread's arrival when its copies have landed.
template <typename KV, int D>
__device__ __forceinline__ void produce_tile(uint16_t* k_s, const PagedAttentionArgs& a, const int32_t* table,
                                             const KV* kc, const KV* vc, int kvh, int k0, int last, uint64_t* full) {
  const int t = static_cast<int>(threadIdx.x) - kThreads;
  for_producer_rows<8, D>(a, table, k0, last, [&](int rr, bool ok, long long row) {
#pragma unroll
    for (int h = 0; h < D / 64; ++h) {
      const int i = h * 8 * kKeys + kProducers * rr + t;
      const long long src = row + static_cast<long long>(kvh) * D + Swizzled<kKeys>::col(i);
      uint16_t* dk = k_s + Swizzled<kKeys>::offset(i);
      cp_async16(dk, kc + src, ok);
      cp_async16(dk + kKeys * D, vc + src, ok);
    }
  });
  mbar_arrive_cp_async(full);
}

// Starts producer thread t's copies of one tile's codes into raw: 16-byte piece t % (D / 16) (16 codes) of each of
// its rows, zeros for a row with no block. The thread later converts exactly these pieces (convert_raw), so its
// own cp.async.wait_group makes them visible to it: no barrier among the producers.
template <int D>
__device__ __forceinline__ void fetch_raw(uint8_t* raw, const PagedAttentionArgs& a, const int32_t* table,
                                          const Fp8Kv* kc, const Fp8Kv* vc, int kvh, int k0, int last) {
  constexpr int kPer = D / 16;  // pieces per row
  const int t = static_cast<int>(threadIdx.x) - kThreads;
  const int col = t % kPer * 16;
  for_producer_rows<kPer, D>(a, table, k0, last, [&](int rr, bool ok, long long row) {
    const long long src = row + static_cast<long long>(kvh) * D + col;
    uint8_t* d = raw + (t / kPer + kProducers / kPer * rr) * D + col;
    cp_async16(d, kc + src, ok);
    cp_async16(d + kKeys * D, vc + src, ok);
  });
}

// Converts the thread's pieces of raw (fetch_raw's) into the stage k_s (V kKeys * D further) in the swizzled
// layout: piece columns col .. + 15 are chunks col / 8 and col / 8 + 1 of one 64-column half. Odd halves store
// their second chunk first, so the 8 lanes of a store phase (one row at D 128; rows 2k, 2k + 1 at D 64) hit 8
// distinct 16-byte bank groups.
template <typename T, int D>
__device__ __forceinline__ void convert_raw(uint16_t* k_s, const uint8_t* raw) {
  constexpr int kPer = D / 16;
  const int t = static_cast<int>(threadIdx.x) - kThreads;
  const int col = t % kPer * 16, odd = col / 64 % 2;
#pragma unroll
  for (int rr = 0; rr < kKeys * kPer / kProducers; ++rr) {
    const int row = t / kPer + kProducers / kPer * rr;
#pragma unroll
    for (int kv = 0; kv < 2; ++kv) {
      const uint4 c = *reinterpret_cast<const uint4*>(raw + kv * kKeys * D + row * D + col);
#pragma unroll
      for (int n = 0; n < 2; ++n) {
        const int h = n ^ odd;  // the chunk stored n-th
        *reinterpret_cast<uint4*>(k_s + kv * kKeys * D + Swizzled<kKeys>::at(row, col + 8 * h)) =
            codes8_as<T>(h ? c.z : c.x, h ? c.w : c.y);
      }
    }
  }
}

// kWs's producer warps over an FP8 cache: the codes of the kRawTiles - 1 tiles after tile j travel while this
// thread converts tile j's into stage j % kStages, once both warpgroups have released the tile kStages before it
// (the raw copies wait for nothing); the stage's full barrier gets the arrival after the converted stores,
// fenced for the consumers' wgmma.
template <typename T, int D>
__device__ __forceinline__ void produce_fp8(uint16_t* kv_s, uint8_t* raw, const PagedAttentionArgs& a,
                                            const int32_t* table, int kvh, const RowRanges<1>& r, uint64_t* full,
                                            uint64_t* empty) {
  constexpr int kRaw = 2 * kKeys * D;     // bytes of one raw (K, V) tile
  constexpr int kTravel = kRawTiles - 1;  // tiles whose codes travel while one converts
  const Fp8Kv* kc = static_cast<const Fp8Kv*>(a.k_cache);
  const Fp8Kv* vc = static_cast<const Fp8Kv*>(a.v_cache);
#pragma unroll 1
  for (int j = 0; j < kTravel; ++j) {  // a group per tile, empty past the range: cp_async_wait counts them
    const int k0 = r.cta_first + j * kKeys;
    if (k0 <= r.cta_last) fetch_raw<D>(raw + j * kRaw, a, table, kc, vc, kvh, k0, r.cta_last);
    cp_async_commit();
  }
  for (int k0 = r.cta_first, j = 0; k0 <= r.cta_last; k0 += kKeys, ++j) {
    // Tile j + kTravel takes tile j - 1's raw tile, which this thread has converted already.
    const int next = k0 + kTravel * kKeys;
    if (next <= r.cta_last) {
      fetch_raw<D>(raw + (j + kTravel) % kRawTiles * kRaw, a, table, kc, vc, kvh, next, r.cta_last);
    }
    cp_async_commit();  // (empty past the range)
    cp_async_wait<kTravel>();  // tile j's codes (this thread's pieces) have landed
    const int st = j % kStages;
    if (j >= kStages) mbar_wait(&empty[st], (j / kStages - 1) & 1);
    convert_raw<T, D>(kv_s + 2 * st * kKeys * D, raw + j % kRawTiles * kRaw);
    fence_async_smem();
    mbar_arrive(&full[st]);
  }
  cp_async_wait<0>();  // no copy outlives its warp
}

// kWs's producer warps: every tile of the CTA's range, tile j into stage j % kStages once both warpgroups have
// released the tile kStages before it (an FP8 cache's through raw, produce_fp8).
template <typename T, typename KV, int D>
__device__ __forceinline__ void produce(uint16_t* kv_s, uint8_t* raw, const PagedAttentionArgs& a, int seq, int kvh,
                                        const RowRanges<1>& r, uint64_t* full, uint64_t* empty) {
  const int32_t* table = a.block_tables + static_cast<long long>(seq) * a.max_blocks;
  if constexpr (sizeof(KV) == 1) {
    produce_fp8<T, D>(kv_s, raw, a, table, kvh, r, full, empty);
  } else {
    const KV* kc = static_cast<const KV*>(a.k_cache);
    const KV* vc = static_cast<const KV*>(a.v_cache);
    for (int k0 = r.cta_first, j = 0; k0 <= r.cta_last; k0 += kKeys, ++j) {
      const int st = j % kStages;
      if (j >= kStages) mbar_wait(&empty[st], (j / kStages - 1) & 1);
      produce_tile<KV, D>(kv_s + 2 * st * kKeys * D, a, table, kc, vc, kvh, k0, r.cta_last, &full[st]);
    }
    cp_async_commit();
    cp_async_wait<0>();  // no copy outlives its warp
  }
}

// kWs's consumer warpgroups: Q, then the tiles as the producer hands them over (kOverlap's order, taking
// turns when kTurns), each stage released once its V has been read; then the rows' output.
template <typename T, int D, bool kTurns>
__device__ __forceinline__ void consume(const uint16_t* q_s, const uint16_t* kv_s, const PagedAttentionArgs& a,
                                        const CtaTile& c, const RowRanges<1>& r, int warp_row, uint64_t* full,
                                        uint64_t* empty) {
  cp_async_wait<0>();  // this thread's part of Q ...
  fence_async_smem();
  named_barrier(1, kThreads);  // ... and every consumer's
  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float m[2] = {kNegInf, kNegInf}, l[2] = {0.f, 0.f};
  const uint16_t* q_g = q_s + (threadIdx.x / 128) * kGroupRows * 64;
  PendingPv pend;
  pend.clear(kv_s + kKeys * D);
  const int group = threadIdx.x / 128;
  if (kTurns && group == 1) named_barrier_arrive(2, kThreads);  // warpgroup 0 issues first
  for (int k0 = r.cta_first, j = 0; k0 <= r.cta_last; k0 += kKeys, ++j) {
    const int st = j % kStages;
    mbar_wait(&full[st], (j / kStages) & 1);
    fence_async_smem();  // the producer's writes, now seen, before this warpgroup's wgmma reads them
    const uint16_t* k_s = kv_s + 2 * st * kKeys * D;
    attend_tile_overlap<T, D, kTurns>(pend, o, m, l, q_g, k_s, k_s + kKeys * D, r, k0, a.scale_log2);
    if (j > 0) mbar_arrive(&empty[(j - 1) % kStages]);  // tile j - 1's V has been read
  }
  if (kTurns && group == 0) named_barrier(2, kThreads);  // warpgroup 1's last hand-over, left unclaimed
  finish_pv<T, D>(o, pend);
  store_rows<T, D>(a, o, l, r.pos[0], c.q0 + c.row0 + warp_row, c.head);
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
  uint16_t* q_s = align_atoms(smem);
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
    if constexpr (kSchedule == kOverlap) {
      attend_tile_overlap<T, D>(pend, o, m, l, q_g, k_s, k_s + kTile, r, k0, a.scale_log2);
    } else {
      const bool touch = k0 <= gr.y && k0 + kKeys - 1 >= gr.x;  // uniform over the warpgroup
      attend_tile<T, D>(touch, o, m, l, q_g, k_s, k_s + kTile, r, k0, a.scale_log2);
    }
    if (t < kKeys) rows_s[j % kStages][t] = row_offset(a, entry, pn, D);  // tile j's offsets are used up
  }
  if constexpr (kSchedule == kOverlap) finish_pv<T, D>(o, pend);
  store_rows<T, D>(a, o, l, r.pos[0], q0 + row0 + warp_row, head);
#else
  (void)a;
  __trap();  // not the sm_90a build: launch_wgmma_prefill is never called then
#endif
}

template <int kSchedule>
struct Kernel {  // for prefill::Launch; smem over 48 KiB
  static constexpr int kBlock = kThreads;
  template <typename KV, int D> static constexpr int smem() { return smem_bytes<D>(); }
  template <typename T, typename KV, int D> static auto fn() { return wgmma_prefill_kernel<T, KV, D, kSchedule>; }
};

template <typename T, typename KV, int D, bool kTurns>
__global__ void __launch_bounds__(kWsThreads, 1) wgmma_ws_prefill_kernel(PagedAttentionArgs a) {
#if defined(CONVEYOR_WGMMA)
  extern __shared__ __align__(1024) uint16_t smem[];  // Q, then (K, V) of each stage, as the kernel above
  uint16_t* q_s = align_atoms(smem);
  uint16_t* kv_s = q_s + kRows * D;
  __shared__ uint64_t full[kStages], empty[kStages];

  CtaTile c;
  if (!c.locate(a, kRows)) return;
  const bool producer = threadIdx.x >= kThreads;
  const int warp_row = producer ? 0 : threadIdx.x / 32 * 16;  // the warp's first row in the CTA's
  const RowRanges<1> r = row_ranges<1>(a, c.q0, c.qlen, c.row0 + warp_row);
  if (threadIdx.x == 0) {
    for (int st = 0; st < kStages; ++st) mbar_init(&full[st], kProducers), mbar_init(&empty[st], kThreads);
  }
  __syncthreads();  // the barriers initialized; the last CTA-wide barrier
  if (producer) {
    uint8_t* raw = reinterpret_cast<uint8_t*>(kv_s + 2 * kStages * kKeys * D);  // FP8 only: WsKernel's extra bytes
    produce<T, KV, D>(kv_s, raw, a, c.seq, c.kvh, r, full, empty);
    return;
  }
  load_q<D>(q_s, a, c.q0, c.qlen, c.row0, c.head);
  cp_async_commit();
  consume<T, D, kTurns>(q_s, kv_s, a, c, r, warp_row, full, empty);
#else
  (void)a;
  __trap();
#endif
}

template <bool kTurns>
struct WsKernel {  // for prefill::Launch; an FP8 cache's raw tiles after the stages
  static constexpr int kBlock = kWsThreads;
  template <typename KV, int D>
  static constexpr int smem() { return smem_bytes<D>() + (sizeof(KV) == 1 ? raw_bytes<D>() : 0); }
  template <typename T, typename KV, int D> static auto fn() { return wgmma_ws_prefill_kernel<T, KV, D, kTurns>; }
};

template <int kSchedule>
void launch_schedule(const PagedAttentionArgs& a, const dim3& grid, DType dt, cudaStream_t s) {
  using K = std::conditional_t<(kSchedule >= kWs), WsKernel<kSchedule == kWsPingpong>, Kernel<kSchedule>>;
  Launch<K> launch{a, grid, s};
  dispatch(a, dt, launch);
}

// CONVEYOR_WGMMA_SCHEDULE: ws (the default: the fastest at 2k-16k on round 8's H100, 432 TFLOP/s at 8k
// against 298-314 for the others), ws_pingpong, overlap or sync (Schedule), read once per process.
int schedule_from_env() {
  const char* v = std::getenv("CONVEYOR_WGMMA_SCHEDULE");
  const std::string name = v == nullptr ? "" : v;
  if (name == "ws" || name.empty()) return kWs;
  if (name == "overlap") return kOverlap;
  if (name == "sync") return kSync;
  if (name == "ws_pingpong") return kWsPingpong;
  CONVEYOR_THROW("CONVEYOR_WGMMA_SCHEDULE='", name, "': expected ws, ws_pingpong, overlap or sync");
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
  if (schedule == kWs) {
    launch_schedule<kWs>(a, grid, dt, s);
  } else if (schedule == kWsPingpong) {
    launch_schedule<kWsPingpong>(a, grid, dt, s);
  } else if (schedule == kOverlap) {
    launch_schedule<kOverlap>(a, grid, dt, s);
  } else {
    launch_schedule<kSync>(a, grid, dt, s);
  }
}

}  // namespace conveyor::cuda_detail
