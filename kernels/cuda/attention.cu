// The decode side of paged attention (see attention.h; the KV write is kv_write.cu). Decode: one CTA per
// (token, KV head, query-head chunk, context split) reads each K/V row of its split once for all query
// heads of the chunk (GQA) through a per-thread cp.async pipeline in shared memory (several steps of
// 16-byte copies in flight, no registers held), keeps an online softmax per lane group in fp32, and
// merges its lane groups through shared memory; with several splits a reduce kernel merges the split
// partials (flash-decoding). Sequences with several new tokens go to attention_prefill.cu. An FP8
// cache runs, by default, attention_decode_mma.cu's tensor-core kernel; the other FP8 layouts run these
// kernels with a one-byte cache element (Fp8Kv): each lane copies 8 codes (8 bytes) per row and converts
// them to fp32 in registers, or, in the wide layout, 16 codes in one 16-byte copy (set_fp8_decode_layout).
#include "kernels/cuda/attention.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "kernels/cuda/attention_device.cuh"
#include "kernels/cuda/pdl.cuh"
#include "runtime/core/cuda_check.h"
#include "runtime/core/env_switch.h"
#include "runtime/core/error.h"

namespace conveyor {
namespace {

using cuda_detail::decode_splits;
using cuda_detail::decode_work;
using cuda_detail::DecodeWork;
using cuda_detail::Elem;
using cuda_detail::kMinPartition;
using cuda_detail::kTargetRows;
using cuda_detail::Fp8Kv;
using cuda_detail::kNegInf;
using cuda_detail::PagedAttentionArgs;

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kUnroll = 4;               // positions per lane group and pipeline stage
// cp.async stages per thread: kStages - 1 steps stay in flight while one is computed (16 KiB of K and V
// per step and CTA). Measured on H200 (b64 x 4k): 3 stages 295 us, 4 stages 296 us (and 6 stages, which
// leave 2 CTAs per SM, much slower): the math needs warps more than the loads need depth.
constexpr int kStages = 3;
constexpr int kMaxHeadTile = 8;          // query heads per CTA; registers grow with it
constexpr int kMaxHeadTileWide = 2;      // the same for the wide FP8 layout (16 elements per lane: q and the
                                         // accumulators take 2 x 16 registers per head, under 128 in all)

// ---- decode -----------------------------------------------------------------------------------------

// Online-softmax state of one lane group for G query heads: running max and sum (log2 domain) and
// this lane's E output dimensions.
template <int G, int E>
struct DecodeState {
  float m[G], l[G], acc[G][E];
};

// The K and V rows of one step of a lane group (kUnroll positions, kGroups apart), read back from
// shared memory, and which of them are visible (the others hold zeros and are masked).
struct KvStep {
  uint4 k[kUnroll], v[kUnroll];
  bool ok[kUnroll];
};

// Shared memory of the decode kernel: kStages x kUnroll x {K, V} 16-byte slots per thread. A thread
// reads back only the slots its own cp.async filled, so the pipeline needs no barrier; after the
// loop the lane-group merge reuses the buffer.
constexpr size_t kDecodeSmemBytes = size_t(kStages) * kUnroll * 2 * kThreads * sizeof(uint4);
static_assert(kDecodeSmemBytes <= 48 * 1024, "more dynamic shared memory needs cudaFuncSetAttribute");

__device__ __forceinline__ uint4* kv_slot(uint4* smem, int stage, int u, int kv) {
  return smem + ((stage * kUnroll + u) * 2 + kv) * kThreads + threadIdx.x;
}

// Block ids (-1 past the split's end or the table) and slots in their blocks of one step's positions
// of this lane group. Read one step before the copies that need them, so the table's latency hides
// behind a step of math.
struct StepBlocks {
  int id[kUnroll], slot[kUnroll];
};

template <int D, int E>
__device__ __forceinline__ void step_blocks(StepBlocks& b, const int32_t* table, const PagedAttentionArgs& a,
                                            int first, int end) {
  constexpr int kGroups = kWarps * (32 / (D / E));
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int want = first + u * kGroups;  // >= 0
    const int idx = a.block_div.div(want);
    b.slot[u] = want - idx * a.block_size;
    b.id[u] = want < end && idx < a.max_blocks ? __ldg(table + idx) : -1;
  }
}

// Starts the copies of one step's K and V rows into stage `stage`; returns the visible positions as
// kUnroll bits. Rows whose block is missing or outside the pool are zero-filled, never read. KV: the
// cache element; E: a lane's elements of a row (8, or 16 for a wide FP8 piece that fills its 16-byte slot;
// an 8-element FP8 piece fills the low 8 bytes).
template <typename KV, int D, int E>
__device__ __forceinline__ unsigned issue_step(uint4* smem, int stage, const StepBlocks& b, const KV* kc, const KV* vc,
                                               const PagedAttentionArgs& a) {
  const long long token_elems = static_cast<long long>(a.n_kv_heads) * D;
  unsigned ok = 0;
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const bool valid = b.id[u] >= 0 && b.id[u] < a.num_blocks;
    const long long row = valid ? (static_cast<long long>(b.id[u]) * a.block_size + b.slot[u]) * token_elems : 0;
    if constexpr (E == 16) {
      cuda_detail::cp_async16(kv_slot(smem, stage, u, 0), kc + row, valid);
      cuda_detail::cp_async16(kv_slot(smem, stage, u, 1), vc + row, valid);
    } else {
      cuda_detail::cp_async_row8(kv_slot(smem, stage, u, 0), kc + row, valid);
      cuda_detail::cp_async_row8(kv_slot(smem, stage, u, 1), vc + row, valid);
    }
    ok |= static_cast<unsigned>(valid) << u;
  }
  return ok;
}

// A lane's E elements of one row slot as fp32: 8 of a 16-bit or FP8 cache, or 16 FP8 codes (E = 16).
template <typename KV, int E>
__device__ __forceinline__ void unpack_row(const uint4& v, float (&f)[E]) {
  if constexpr (E == 16) {
    cuda_detail::unpack8<KV>(make_uint4(v.x, v.y, 0u, 0u), f);
    cuda_detail::unpack8<KV>(make_uint4(v.z, v.w, 0u, 0u), f + 8);
  } else {
    cuda_detail::unpack8<KV>(v, f);
  }
}

// One step of a lane group over loaded rows: the scores (reduced over the kLanesPerRow lanes of a
// row), the softmax rescale and the V accumulation. KV: the cache element the rows hold.
template <typename KV, int D, int G, int E>
__device__ __forceinline__ void decode_step(DecodeState<G, E>& st, const float (&qf)[G][E], const KvStep& r) {
  constexpr int kLanesPerRow = D / E;
  float s[kUnroll][G];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    float kf[E];
    unpack_row<KV, E>(r.k[u], kf);
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float d = 0.f;
#pragma unroll
      for (int i = 0; i < E; ++i) d = fmaf(qf[g][i], kf[i], d);
#pragma unroll
      for (int o = kLanesPerRow / 2; o > 0; o /= 2) d += __shfl_xor_sync(0xffffffffu, d, o);
      s[u][g] = r.ok[u] ? d : kNegInf;
    }
  }
#pragma unroll
  for (int g = 0; g < G; ++g) {
    float mx = st.m[g];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) mx = fmaxf(mx, s[u][g]);
    const float safe = mx == kNegInf ? 0.f : mx;  // nothing visible yet: keep everything at zero
    const float alpha = cuda_detail::fast_exp2(st.m[g] - safe);
    st.m[g] = mx;
    st.l[g] *= alpha;
#pragma unroll
    for (int i = 0; i < E; ++i) st.acc[g][i] *= alpha;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      s[u][g] = cuda_detail::fast_exp2(s[u][g] - safe);
      st.l[g] += s[u][g];
    }
  }
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    float vf[E];
    unpack_row<KV, E>(r.v[u], vf);
#pragma unroll
    for (int g = 0; g < G; ++g)
#pragma unroll
      for (int i = 0; i < E; ++i) st.acc[g][i] = fmaf(s[u][g], vf[i], st.acc[g][i]);
  }
}

// Merges the lane groups of the CTA through shared memory and writes the output rows (one split) or
// the split's normalized partial and its (max, sum).
template <typename T, int D, int G, int E>
__device__ __forceinline__ void decode_merge(const DecodeState<G, E>& st, const PagedAttentionArgs& a, int t, int h0,
                                             int heads, int splits, uint4* smem) {
  constexpr int kLanesPerRow = D / E;
  constexpr int kGroups = kWarps * (32 / kLanesPerRow);  // kGroups * D == 128 E
  static_assert(sizeof(float[G][kGroups * D]) + sizeof(float2[G][kGroups]) <= kDecodeSmemBytes,
                "the merge must fit in the pipeline's shared memory");
  auto acc_s = reinterpret_cast<float(*)[kGroups * D]>(smem);
  auto ml_s = reinterpret_cast<float2(*)[kGroups]>(smem + G * kGroups * D / 4);
  const int lane_group = threadIdx.x / kLanesPerRow, sl = threadIdx.x % kLanesPerRow;
#pragma unroll
  for (int g = 0; g < G; ++g) {
    if (sl == 0) ml_s[g][lane_group] = make_float2(st.m[g], st.l[g]);
#pragma unroll
    for (int i = 0; i < E; ++i) acc_s[g][lane_group * D + sl * E + i] = st.acc[g][i];
  }
  __syncthreads();
  const long long row0 = static_cast<long long>(t) * a.n_heads + h0;
  for (int i = threadIdx.x; i < heads * D; i += kThreads) {
    const int g = i / D, d = i % D;
    cuda_detail::merge_store<T, D>(
        a, row0 + g, d, splits, kGroups, [&](int j) { return ml_s[g][j]; }, [&](int j) { return acc_s[g][j * D + d]; });
  }
}

// D: head_dim (16, 32, 64, 128, 256); G: query heads per CTA; E: elements of a row per lane (8; 16 for the
// wide FP8 layout, one 16-byte copy of codes per lane). A lane group of D/E lanes holds one K/V row; the
// 128 E / D lane groups of the CTA walk the split's positions interleaved.
// Up to 4 heads per CTA the registers are capped at 128 so that 4 CTAs (16 warps) share an SM: the
// step's math is latency-bound and more warps measured faster than deeper pipelines (H200). KV: the
// cache element, T for a 16-bit cache, Fp8Kv for an FP8 one.
template <typename T, typename KV, int D, int G, int E>
__global__ void __launch_bounds__(kThreads, G <= 4 ? 4 : 2) decode_kernel(PagedAttentionArgs a) {
  cuda_detail::pdl_wait();               // pdl.cuh: this kernel reads the one before ...
  cuda_detail::pdl_launch_dependents();  // ... and the next may be placed now
  constexpr int kLanesPerRow = D / E;
  constexpr int kGroups = kWarps * (32 / kLanesPerRow);
  const int2 cta = cuda_detail::decode_cta(a);
  const int t = cta.x, hc = cta.y;
  const int kvh = hc / a.chunks;
  const int h0 = kvh * a.group + (hc % a.chunks) * G;
  const int heads = min(G, (kvh + 1) * a.group - h0);  // valid heads of this chunk
  const DecodeWork w = decode_work(a, t, blockIdx.z);
  if (w.skip) return;  // uniform over the CTA

  const int lane_group = threadIdx.x / kLanesPerRow, sl = threadIdx.x % kLanesPerRow;
  float qf[G][E];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const long long row = static_cast<long long>(t) * a.n_heads + h0 + min(g, heads - 1);
    const uint4* qrow = reinterpret_cast<const uint4*>(static_cast<const T*>(a.q) + row * D) + sl * (E / 8);
#pragma unroll
    for (int h = 0; h < E / 8; ++h) cuda_detail::unpack8<T>(__ldg(qrow + h), qf[g] + 8 * h);
#pragma unroll
    for (int i = 0; i < E; ++i) qf[g][i] *= a.scale_log2;  // padded heads repeat a real one, never stored
  }
  DecodeState<G, E> st;
#pragma unroll
  for (int g = 0; g < G; ++g) {
    st.m[g] = kNegInf;
    st.l[g] = 0.f;
#pragma unroll
    for (int i = 0; i < E; ++i) st.acc[g][i] = 0.f;
  }
  const int32_t* table = a.block_tables + static_cast<long long>(w.seq) * a.max_blocks;
  const KV* kc = static_cast<const KV*>(a.k_cache) + static_cast<long long>(kvh) * D + sl * E;
  const KV* vc = static_cast<const KV*>(a.v_cache) + static_cast<long long>(kvh) * D + sl * E;
  extern __shared__ uint4 smem[];
  // Step j (kStride positions) lives in stage j % kStages; its copies start kStages - 1 steps before
  // its math. Every thread commits one group per step, empty or not, so wait_group counts steps. The
  // trip count is the same for every lane of the CTA: the shuffles need whole warps.
  constexpr int kStride = kGroups * kUnroll;
  constexpr unsigned kStageBits = (1u << kUnroll) - 1;
  static_assert(kStages * kUnroll <= 32, "visibility bits of all stages fit one word");
  const int steps = w.end > w.begin ? (w.end - w.begin + kStride - 1) / kStride : 0;
  const int first = w.begin + lane_group;
  StepBlocks blk;
  unsigned visible = 0;  // bit stage * kUnroll + u: position u of that stage is visible
#pragma unroll
  for (int j = 0; j < kStages - 1; ++j) {
    if (j < steps) {
      step_blocks<D, E>(blk, table, a, first + j * kStride, w.end);
      visible |= issue_step<KV, D, E>(smem, j, blk, kc, vc, a) << (j * kUnroll);
    }
    cuda_detail::cp_async_commit();
  }
  if (kStages - 1 < steps) step_blocks<D, E>(blk, table, a, first + (kStages - 1) * kStride, w.end);
  for (int j = 0; j < steps; ++j) {
    const int ahead = j + kStages - 1;
    if (ahead < steps) {
      const int sa = ahead % kStages;
      const unsigned bits = issue_step<KV, D, E>(smem, sa, blk, kc, vc, a);
      visible = (visible & ~(kStageBits << (sa * kUnroll))) | (bits << (sa * kUnroll));
      if (ahead + 1 < steps) step_blocks<D, E>(blk, table, a, first + (ahead + 1) * kStride, w.end);
    }
    cuda_detail::cp_async_commit();
    cuda_detail::cp_async_wait<kStages - 1>();  // step j has landed
    const int stage = j % kStages;
    KvStep r;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      r.k[u] = *kv_slot(smem, stage, u, 0);
      r.v[u] = *kv_slot(smem, stage, u, 1);
      r.ok[u] = (visible >> (stage * kUnroll + u)) & 1u;
    }
    decode_step<KV, D, G, E>(st, qf, r);
  }
  cuda_detail::cp_async_wait<0>();
  __syncthreads();  // the merge overwrites other threads' stages
  decode_merge<T, D, G, E>(st, a, t, h0, heads, w.splits, smem);
}

// Merges the splits of one (token, head): weights exp2(m_s - M) * l_s, normalized.
template <typename T>
__global__ void decode_reduce_kernel(PagedAttentionArgs a) {
  cuda_detail::pdl_wait();               // pdl.cuh: this kernel reads the one before ...
  cuda_detail::pdl_launch_dependents();  // ... and the next may be placed now
  const int t = blockIdx.x, h = blockIdx.y;
  const int splits = cuda_detail::decode_live_splits(a);
  if (splits == 1) return;  // the decode kernel wrote the output itself
  if (a.skip_multi) {
    const int seq = cuda_detail::find_seq(a.query_start, a.num_seqs, t);  // blockDim is a multiple of 32
    if (__ldg(a.query_start + seq + 1) - __ldg(a.query_start + seq) > 1) return;
  }
  const long long row = static_cast<long long>(t) * a.n_heads + h;
  const float2* ml = a.part_ml + row * splits;
  float mx = kNegInf;
  for (int j = 0; j < splits; ++j) mx = fmaxf(mx, ml[j].x);
  const float safe = mx == kNegInf ? 0.f : mx;
  for (int d = threadIdx.x; d < a.head_dim; d += blockDim.x) {
    float sum = 0.f, o = 0.f;
    for (int j = 0; j < splits; ++j) {
      const float wgt = exp2f(ml[j].x - safe) * ml[j].y;
      sum += wgt;
      o += wgt * a.part_o[(row * splits + j) * a.head_dim + d];
    }
    static_cast<T*>(a.out)[row * a.head_dim + d] = Elem<T>::from_float(sum > 0.f ? o / sum : 0.f);
  }
}

int ceil_div(long long a, long long b) { return static_cast<int>((a + b - 1) / b); }

int context_splits_max(int max_context_len) { return std::max(1, ceil_div(max_context_len, kMinPartition)); }

int head_tile(int group, int max_tile) {
  int g = 1;
  while (g < group && g < max_tile) g *= 2;
  return g;
}

// The FP8 decode layout (attention.h): -1 until read from CONVEYOR_FP8_DECODE (mma, the default, narrow or
// wide), else a Fp8DecodeLayout.
int g_fp8_decode = -1;

Fp8DecodeLayout fp8_decode_layout() {
  if (g_fp8_decode < 0) {
    const char* v = std::getenv("CONVEYOR_FP8_DECODE");
    const std::string name = v == nullptr ? "" : v;
    CONVEYOR_CHECK(name.empty() || name == "mma" || name == "narrow" || name == "wide", "CONVEYOR_FP8_DECODE='",
                   name, "': expected mma, narrow or wide");
    g_fp8_decode = static_cast<int>(name == "wide"     ? Fp8DecodeLayout::kWide
                                    : name == "narrow" ? Fp8DecodeLayout::kNarrow
                                                       : Fp8DecodeLayout::kMma);
  }
  return static_cast<Fp8DecodeLayout>(g_fp8_decode);
}

// CONVEYOR_DECODE_HEADS_FIRST=1 (read once): the decode grids heads-first (PagedAttentionArgs::heads_first), opt-in
// until a GPU run times it: round 22's batch-256 FP8 step read its cache at 2.66 TB/s of the H100's 3.35, each
// CTA one KV head's 128 bytes of every 1 KB row while the CTAs resident with it took the same head of other tokens.
int g_heads_first = -1;  // -1 until read from the environment or set_decode_heads_first
bool decode_heads_first() {
  if (g_heads_first < 0) g_heads_first = env_switch_opt_in("CONVEYOR_DECODE_HEADS_FIRST") ? 1 : 0;
  return g_heads_first == 1;
}

template <typename T, typename KV, int D, int G, int E>
void launch_decode_g(const PagedAttentionArgs& a, cudaStream_t s) {
  cuda_detail::launch_maybe_pdl(decode_kernel<T, KV, D, G, E>, cuda_detail::decode_grid(a), dim3(kThreads),
                                kDecodeSmemBytes, s, a);
  CONVEYOR_CUDA_CHECK(cudaGetLastError());
}

template <typename T, typename KV, int D, int E>
void launch_decode_d(const PagedAttentionArgs& a, int tile, cudaStream_t s) {
  if constexpr (E == 16) {  // the wide layout's head tile is at most kMaxHeadTileWide
    if (tile == 1) return launch_decode_g<T, KV, D, 1, E>(a, s);
    return launch_decode_g<T, KV, D, 2, E>(a, s);
  } else {
    switch (tile) {
      case 1: return launch_decode_g<T, KV, D, 1, E>(a, s);
      case 2: return launch_decode_g<T, KV, D, 2, E>(a, s);
      case 4: return launch_decode_g<T, KV, D, 4, E>(a, s);
      default: return launch_decode_g<T, KV, D, 8, E>(a, s);
    }
  }
}

template <typename T, typename KV, int E = 8>
void launch_decode(const PagedAttentionArgs& a, int tile, cudaStream_t s) {
  switch (a.head_dim) {
    case 16: launch_decode_d<T, KV, 16, E>(a, tile, s); break;
    case 32: launch_decode_d<T, KV, 32, E>(a, tile, s); break;
    case 64: launch_decode_d<T, KV, 64, E>(a, tile, s); break;
    case 128: launch_decode_d<T, KV, 128, E>(a, tile, s); break;
    default: launch_decode_d<T, KV, 256, E>(a, tile, s); break;
  }
}

// The decode kernel of the cache format and FP8 layout, then the merge of its splits.
template <typename T>
void launch_decode_all(const PagedAttentionArgs& a, Fp8DecodeLayout layout, int tile, DType dt, cudaStream_t s) {
  if (!a.kv_fp8) launch_decode<T, T>(a, tile, s);
  else if (layout == Fp8DecodeLayout::kMma) cuda_detail::launch_decode_mma(a, dt, s);
  else if (layout == Fp8DecodeLayout::kWide) launch_decode<T, Fp8Kv, 16>(a, tile, s);
  else launch_decode<T, Fp8Kv>(a, tile, s);
  if (a.splits > 1) {
    cuda_detail::launch_maybe_pdl(decode_reduce_kernel<T>, dim3(a.num_tokens, a.n_heads),
                                  dim3(std::min(a.head_dim, 128)), 0, s, a);
    CONVEYOR_CUDA_CHECK(cudaGetLastError());
  }
}

void check_attention_args(const AttentionBatchCuda& b, const PagedKvShape& shape, const AttentionParams& p,
                          DType dt) {
  CONVEYOR_CHECK(dt == DType::kBF16 || dt == DType::kF16, "paged_attention_cuda: dtype must be bf16 or f16, got ",
                 dtype_name(dt));
  CONVEYOR_CHECK(shape.head_dim == 16 || shape.head_dim == 32 || shape.head_dim == 64 || shape.head_dim == 128 ||
                     shape.head_dim == 256,
                 "paged_attention_cuda: head_dim ", shape.head_dim, " is not supported (16, 32, 64, 128 or 256)");
  CONVEYOR_CHECK(shape.num_blocks > 0 && shape.block_size > 0 && shape.n_kv_heads > 0,
                 "paged_attention_cuda: bad KV cache shape num_blocks=", shape.num_blocks, " block_size=",
                 shape.block_size, " n_kv_heads=", shape.n_kv_heads);
  CONVEYOR_CHECK(p.n_heads > 0 && p.n_heads % shape.n_kv_heads == 0, "paged_attention_cuda: n_heads ", p.n_heads,
                 " is not a positive multiple of n_kv_heads ", shape.n_kv_heads);
  CONVEYOR_CHECK(p.scale > 0.f && std::isfinite(p.scale), "paged_attention_cuda: scale must be > 0, got ", p.scale);
  CONVEYOR_CHECK(p.sliding_window >= 0, "paged_attention_cuda: sliding_window must be >= 0, got ", p.sliding_window);
  CONVEYOR_CHECK(b.num_tokens >= 0 && b.num_seqs >= 0 && b.max_query_len >= 0 && b.max_context_len >= 0,
                 "paged_attention_cuda: negative batch bounds");
  CONVEYOR_CHECK(b.num_tokens == 0 || b.num_seqs > 0, "paged_attention_cuda: ", b.num_tokens,
                 " tokens but no sequence");
  CONVEYOR_CHECK(b.num_seqs <= 65535, "paged_attention_cuda: ", b.num_seqs, " sequences exceed 65535 per call");
}


}  // namespace

void set_fp8_decode_layout(Fp8DecodeLayout layout) { g_fp8_decode = static_cast<int>(layout); }
void set_decode_heads_first(bool on) { g_heads_first = on ? 1 : 0; }

size_t paged_attention_workspace_bytes(int num_tokens, int n_heads, int head_dim, int max_context_len) {
  const int c = context_splits_max(max_context_len);
  if (c <= 1 || num_tokens <= 0 || n_heads <= 0) return 0;
  const long long rows = std::min<long long>(static_cast<long long>(num_tokens) * n_heads * c, kTargetRows);
  return static_cast<size_t>(rows) * (static_cast<size_t>(head_dim) * sizeof(float) + sizeof(float2));
}

void paged_attention_cuda(void* out, const void* q, const void* k_cache, const void* v_cache,
                          const AttentionBatchCuda& b, const PagedKvShape& shape, const AttentionParams& p,
                          void* workspace, DType dt, cudaStream_t s, const KvCacheFormat& kv) {
  check_attention_args(b, shape, p, dt);
  cuda_detail::check_kv_format(kv, "paged_attention_cuda");
  if (b.num_tokens == 0) return;
  CONVEYOR_CHECK(out && q && k_cache && v_cache && b.query_start && b.positions && b.block_tables,
                 "paged_attention_cuda: null pointer argument");
  CONVEYOR_CHECK(((reinterpret_cast<uintptr_t>(q) | reinterpret_cast<uintptr_t>(k_cache) |
                   reinterpret_cast<uintptr_t>(v_cache) | reinterpret_cast<uintptr_t>(out)) % 16) == 0,
                 "paged_attention_cuda: q, out and the caches must be 16-byte aligned");
  PagedAttentionArgs a;
  a.out = out;
  a.q = q;
  a.k_cache = k_cache;
  a.v_cache = v_cache;
  a.query_start = b.query_start;
  a.positions = b.positions;
  a.block_tables = b.block_tables;
  a.num_seqs = b.num_seqs;
  a.num_tokens = b.num_tokens;
  a.max_blocks = b.max_blocks_per_seq;
  a.num_blocks = shape.num_blocks;
  a.block_size = shape.block_size;
  a.block_div = cuda_detail::FastDiv(shape.block_size);
  a.n_heads = p.n_heads;
  a.n_kv_heads = shape.n_kv_heads;
  a.group = p.n_heads / shape.n_kv_heads;
  a.head_dim = shape.head_dim;
  a.window = p.sliding_window;
  a.kv_fp8 = kv.fp8 ? 1 : 0;
  a.k_scale = kv.fp8 ? kv.scales.k : 1.f;
  a.v_scale = kv.fp8 ? kv.scales.v : 1.f;
  a.scale_log2 = p.scale * a.k_scale * 1.4426950408889634f;  // q.(code * k_scale) = (q.code) * k_scale
  a.splits = decode_splits(b.num_tokens, p.n_heads, b.max_context_len);
  a.max_context = b.max_context_len_dev;
  Fp8DecodeLayout layout = kv.fp8 ? fp8_decode_layout() : Fp8DecodeLayout::kNarrow;
  if (layout == Fp8DecodeLayout::kMma && !cuda_detail::decode_mma_supports(shape.head_dim))
    layout = Fp8DecodeLayout::kNarrow;
  const int tile = layout == Fp8DecodeLayout::kMma    ? kMaxHeadTile
                   : layout == Fp8DecodeLayout::kWide ? head_tile(a.group, kMaxHeadTileWide)
                                                      : head_tile(a.group, kMaxHeadTile);
  a.chunks = ceil_div(a.group, tile);
  a.heads_first = decode_heads_first() && b.num_tokens <= 65535 ? 1 : 0;  // tokens on gridDim.y then
  CONVEYOR_CHECK(static_cast<long long>(a.n_kv_heads) * a.chunks <= 65535 && a.splits <= 65535,
                 "paged_attention_cuda: grid too large (n_kv_heads ", a.n_kv_heads, ", splits ", a.splits, ")");
  if (a.splits > 1) {
    CONVEYOR_CHECK(workspace != nullptr, "paged_attention_cuda: this batch splits the context ", a.splits,
                   " ways and needs paged_attention_workspace_bytes(", b.num_tokens, ", ", p.n_heads, ", ",
                   shape.head_dim, ", ", b.max_context_len, ") bytes of workspace, got null");
    a.part_o = static_cast<float*>(workspace);
    a.part_ml = reinterpret_cast<float2*>(a.part_o + static_cast<size_t>(b.num_tokens) * p.n_heads * a.splits *
                                                         shape.head_dim);
  }
  const bool prefill = b.max_query_len > 1 && cuda_detail::prefill_kernel_supports(shape.head_dim);
  a.skip_multi = prefill ? 1 : 0;
  if (dt == DType::kBF16) launch_decode_all<__nv_bfloat16>(a, layout, tile, dt, s);
  else launch_decode_all<__half>(a, layout, tile, dt, s);
  if (prefill) cuda_detail::launch_prefill_attention(a, b.max_query_len, dt, s);
}

}  // namespace conveyor
