// Decode attention over an FP8 cache on tensor cores (mma.sync m16n8k16, f16 in, fp32 accumulate): the
// default FP8 decode layout ("mma", attention.h). The CUDA-core decode kernel of attention.cu spends a 16-bit
// lane's instructions per position on half the bytes (round 4: 1.87 TB/s of FP8 cache against 2.82 of bf16 on
// an H100, and 16 codes per lane measured no better in round 9), so its rate is bound by the math, not by
// memory. Here one warp computes S = Q K^T for up to 8 query heads of one KV head (the mma's 16 rows, the
// rest zero) over 16 positions in 16 mma, and O += P V in as many: e4m3 codes convert to f16 exactly
// (cvt.rn.f16x2.e4m3x2), Q is rounded to f16 (exact for bf16 values of magnitude 2^-14 .. 65504), P is f16.
// Layout: one CTA per (token, KV head, head chunk of 8, context split), 4 warps taking 16-position steps in
// turn; each thread cp.async-copies exactly the K and V bytes its fragments need into its own shared-memory
// slots (kStages steps in flight, no barrier), and reads them back as whole 16- or 8-byte words. The
// contraction index of S is permuted (thread t's k indices 2t, 2t+1, 2t+8, 2t+9 of k-step s in 64-dim chunk
// c are dims 64c + 16t + 4s + 0..3, for Q and K alike), so a thread's K bytes of a row are one 16-byte
// piece; the output columns of O are permuted (column n of O's tile jj in chunk c is dim 64c + 8n + jj), so
// its V bytes of a row are one 8-byte piece, paired across two positions by byte permutes.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "kernels/cuda/attention_device.cuh"
#include "kernels/cuda/e4m3.cuh"
#include "kernels/cuda/pdl.cuh"
#include "runtime/core/cuda_check.h"

namespace conveyor::cuda_detail {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kHeads = 8;     // query heads per CTA (rows 0..7 of the mma; 8..15 are zero)
constexpr int kStep = 16;     // positions per warp step (two 8-position n-tiles of S, one k-step of P V)
constexpr int kStages = 3;    // steps per thread in flight, in shared memory

template <int D>
struct Slots {                       // per thread and stage
  static constexpr int kC = D / 64;  // 64-dim chunks of a row
  static constexpr int kK = 2 * kC;  // 16-byte K pieces: n-tile x chunk
  static constexpr int kV = 4 * kC;  // 8-byte V pieces: 4 positions x chunk
  static constexpr size_t kBytes = size_t(kStages) * kThreads * (kK * 16 + kV * 8);
  static constexpr size_t kMerge = sizeof(float) * kWarps * kHeads * D + sizeof(float2) * kWarps * kHeads;
  static constexpr size_t kSmem = kBytes > kMerge ? kBytes : kMerge;
};

// C += A B over one m16n8k16 tile; A's rows 0..7 are a0 (k 2t, 2t + 1) and a2 (k 2t + 8, 2t + 9) of row g,
// its rows 8..15 zero (no ninth query head).
__device__ __forceinline__ void mma_f16(float (&c)[4], uint32_t a0, uint32_t a2, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%6,%5,%6}, {%7,%8}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a2), "r"(0u), "r"(b0), "r"(b1));
}


__device__ __forceinline__ uint32_t half2_bits(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return reinterpret_cast<const uint32_t&>(h);
}

__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}

// The thread's Q fragments: for chunk c and k-step s, dims 64c + 16t + 4s + {0, 1} and + {2, 3} of head
// h0 + g as f16x2 (zero past the chunk's valid heads).
template <typename T, int D>
__device__ __forceinline__ void load_q(uint32_t (&qa)[D / 16][2], const PagedAttentionArgs& a, int tok, int h0,
                                       int heads) {
  const int g = (threadIdx.x % 32) / 4, t = threadIdx.x % 4;
  const bool ok = g < heads;
  const T* row = static_cast<const T*>(a.q) + (static_cast<long long>(tok) * a.n_heads + h0 + (ok ? g : 0)) * D;
#pragma unroll
  for (int c = 0; c < D / 64; ++c) {
    float f[16];
    const uint4* src = reinterpret_cast<const uint4*>(row + 64 * c + 16 * t);
    unpack8<T>(__ldg(src), f);
    unpack8<T>(__ldg(src + 1), f + 8);
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      qa[4 * c + s][0] = ok ? half2_bits(f[4 * s], f[4 * s + 1]) : 0u;
      qa[4 * c + s][1] = ok ? half2_bits(f[4 * s + 2], f[4 * s + 3]) : 0u;
    }
  }
}

// The pool slot (block * block_size + in-block position) of position p, -1 past `end` or the table.
__device__ __forceinline__ int pool_slot(const PagedAttentionArgs& a, const int32_t* table, int p, int end) {
  const int idx = a.block_div.div(p);
  const int block = p < end && idx < a.max_blocks ? __ldg(table + idx) : -1;
  return block >= 0 && block < a.num_blocks ? block * a.block_size + (p - idx * a.block_size) : -1;
}

// Starts one step's copies: lane l < 16 looked up position p0 + l (`slot`); this thread's K rows are
// p0 + g and p0 + 8 + g (16 bytes per chunk at dim 64c + 16t), its V rows p0 + 2t, 2t + 1, 2t + 8, 2t + 9
// (8 bytes per chunk at dim 64c + 8g). Returns the visibility of its score positions (= its V rows) as 4 bits.
template <int D>
__device__ __forceinline__ unsigned issue(uint4* ks, uint2* vs, int slot, const uint8_t* kc, const uint8_t* vc,
                                          long long token_bytes) {
  using S = Slots<D>;
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  unsigned ok = 0;
#pragma unroll
  for (int n = 0; n < 2; ++n) {
    const int sl = __shfl_sync(0xffffffffu, slot, 8 * n + g);
    const long long off = sl >= 0 ? sl * token_bytes : 0;
#pragma unroll
    for (int c = 0; c < S::kC; ++c) cp_async16(ks + (n * S::kC + c) * kThreads, kc + off + 64 * c + 16 * t, sl >= 0);
  }
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int sl = __shfl_sync(0xffffffffu, slot, 2 * t + (r & 1) + 8 * (r >> 1));
    const long long off = sl >= 0 ? sl * token_bytes : 0;
#pragma unroll
    for (int c = 0; c < S::kC; ++c) cp_async8(vs + (r * S::kC + c) * kThreads, vc + off + 64 * c + 8 * g, sl >= 0);
    ok |= static_cast<unsigned>(sl >= 0) << r;
  }
  return ok;
}

// A warp's online-softmax state: head g's running max and this lane's partial sum (log2 domain), and O's
// accumulators (tile jj of chunk c: [c * 8 + jj]; rows 8..15 stay zero).
template <int D>
struct Acc {
  float m, l;
  float o[D / 8][4];
};

// The thread's Q fragments as step() reads them: from its registers (load_q's qa).
template <int D>
struct QInRegisters {
  const uint32_t (&qa)[D / 16][2];
  __device__ __forceinline__ uint2 operator()(int i) const { return make_uint2(qa[i][0], qa[i][1]); }
};

// One step over landed slots: S, the softmax update, O += P V.
template <int D, typename Q>
__device__ __forceinline__ void step(Acc<D>& st, const Q& q, const uint4* ks, const uint2* vs, unsigned ok,
                                     float scale_log2) {
  using S = Slots<D>;
  float s[2][4];
#pragma unroll
  for (int n = 0; n < 2; ++n) {
    s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
    for (int c = 0; c < S::kC; ++c) {
      const uint4 kw = ks[(n * S::kC + c) * kThreads];
      const uint32_t w[4] = {kw.x, kw.y, kw.z, kw.w};
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        uint32_t lo, hi;
        e4m3x4_to_f16x2x2(w[k], lo, hi);
        const uint2 qf = q(4 * c + k);
        mma_f16(s[n], qf.x, qf.y, lo, hi);
      }
    }
  }
  // s[n][e] (e < 2): head g, position 8n + 2t + e; visible when bit 2n + e of ok is set.
  float mx = st.m;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float& x = s[i / 2][i % 2];
    x = (ok >> i) & 1u ? x * scale_log2 : kNegInf;
    mx = fmaxf(mx, x);
  }
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
  const float safe = mx == kNegInf ? 0.f : mx;
  const float alpha = fast_exp2(st.m - safe);
  st.m = mx;
  float p[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) p[i] = fast_exp2(s[i / 2][i % 2] - safe);
  st.l = st.l * alpha + (p[0] + p[1]) + (p[2] + p[3]);
  const uint32_t pa0 = half2_bits(p[0], p[1]), pa2 = half2_bits(p[2], p[3]);
#pragma unroll
  for (int c = 0; c < S::kC; ++c) {
    const uint2 v0 = vs[(0 * S::kC + c) * kThreads], v1 = vs[(1 * S::kC + c) * kThreads];
    const uint2 v2 = vs[(2 * S::kC + c) * kThreads], v3 = vs[(3 * S::kC + c) * kThreads];
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // dims 64c + 8g + 4h .. + 3: words .x, .y
      const uint32_t w0 = h ? v0.y : v0.x, w1 = h ? v1.y : v1.x, w2 = h ? v2.y : v2.x, w3 = h ? v3.y : v3.x;
      // Byte e of positions 2t and 2t + 1 (2t + 8 and 2t + 9) side by side: the pairs of B's two registers.
      const uint32_t lo01 = prmt(w0, w1, 0x5140), hi01 = prmt(w0, w1, 0x7362);
      const uint32_t lo23 = prmt(w2, w3, 0x5140), hi23 = prmt(w2, w3, 0x7362);
      uint32_t b0[4], b1[4];  // B's two registers for dims +e: positions 2t, 2t + 1 and 2t + 8, 2t + 9
      e4m3x4_to_f16x2x2(lo01, b0[0], b0[1]);
      e4m3x4_to_f16x2x2(hi01, b0[2], b0[3]);
      e4m3x4_to_f16x2x2(lo23, b1[0], b1[1]);
      e4m3x4_to_f16x2x2(hi23, b1[2], b1[3]);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float(&o)[4] = st.o[c * 8 + 4 * h + e];
        o[0] *= alpha;
        o[1] *= alpha;
        mma_f16(o, pa0, pa2, b0[e], b1[e]);
      }
    }
  }
}

// Merges the warps' states through shared memory (merge_store), as attention.cu's decode_merge does for its
// lane groups.
template <typename T, int D>
__device__ __forceinline__ void merge(const Acc<D>& st, const PagedAttentionArgs& a, int tok, int h0, int heads,
                                      int splits, void* smem) {
  auto o_s = reinterpret_cast<float(*)[kHeads][D]>(smem);
  auto ml_s = reinterpret_cast<float2(*)[kHeads]>(o_s + kWarps);
  const int warp = threadIdx.x / 32, g = (threadIdx.x % 32) / 4, t = threadIdx.x % 4;
  if (t == 0) ml_s[warp][g] = make_float2(st.m, st.l);
#pragma unroll
  for (int c = 0; c < D / 64; ++c)
#pragma unroll
    for (int jj = 0; jj < 8; ++jj) {
      o_s[warp][g][64 * c + 16 * t + jj] = st.o[c * 8 + jj][0];
      o_s[warp][g][64 * c + 16 * t + 8 + jj] = st.o[c * 8 + jj][1];
    }
  __syncthreads();
  const long long row0 = static_cast<long long>(tok) * a.n_heads + h0;
  for (int i = threadIdx.x; i < heads * D; i += kThreads) {
    const int h = i / D, d = i % D;
    merge_store<T, D>(
        a, row0 + h, d, splits, kWarps, [&](int w) { return ml_s[w][h]; }, [&](int w) { return o_s[w][h][d]; });
  }
}

// kMinBlocks: CTAs an SM must hold (the register cap). At head_dim 128 the kernel takes 154 registers, 3 CTAs an SM.
// 3 a SM leave the last wave of a batch-256 step 17% full (2,048 CTAs on 396 places: round 19's H100 read ~2.9 TB/s
// in the full waves and 218.6 us in all, six waves' time for 5.2 of work). A 4-CTA variant (Q's fragments in shared
// memory, 125 registers, no spills) measured no consistent difference in round 22 (batch 256 FP8 128 in / 512 out,
// H100: +-0.4%) nor in round 21 (1024 in / 128 out) and was removed.
template <typename T, int D, int kMinBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks) decode_mma_kernel(PagedAttentionArgs a) {
  cuda_detail::pdl_wait();               // pdl.cuh: this kernel reads the one before ...
  cuda_detail::pdl_launch_dependents();  // ... and the next may be placed now
  using S = Slots<D>;
  const int2 cta = decode_cta(a);
  const int tok = cta.x, kvh = cta.y / a.chunks;
  const int h0 = kvh * a.group + (cta.y % a.chunks) * kHeads;
  const int heads = min(kHeads, (kvh + 1) * a.group - h0);
  const DecodeWork w = decode_work(a, tok, blockIdx.z);
  if (w.skip) return;  // uniform over the CTA
  extern __shared__ uint4 smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  uint32_t qa[D / 16][2];
  load_q<T, D>(qa, a, tok, h0, heads);
  const QInRegisters<D> q{qa};
  Acc<D> st;
  st.m = kNegInf;
  st.l = 0.f;
#pragma unroll
  for (int n = 0; n < D / 8; ++n) st.o[n][0] = st.o[n][1] = st.o[n][2] = st.o[n][3] = 0.f;

  uint4* ks = smem + threadIdx.x;  // [stage][K piece][thread]
  uint2* vs = reinterpret_cast<uint2*>(smem + kStages * S::kK * kThreads) + threadIdx.x;  // [stage][V piece][thread]
  const int32_t* table = a.block_tables + static_cast<long long>(w.seq) * a.max_blocks;
  const auto* kc = static_cast<const uint8_t*>(a.k_cache) + static_cast<long long>(kvh) * D;
  const auto* vc = static_cast<const uint8_t*>(a.v_cache) + static_cast<long long>(kvh) * D;
  const long long token_bytes = static_cast<long long>(a.n_kv_heads) * D;
  // Warp `warp` takes steps warp, warp + kWarps, ...: its j-th starts at first + j * kWarps * kStep. The
  // trip count is uniform over the warp (the copies shuffle the looked-up slots).
  const int total = w.end > w.begin ? (w.end - w.begin + kStep - 1) / kStep : 0;
  const int steps = total > warp ? (total - warp + kWarps - 1) / kWarps : 0;
  const int first = w.begin + warp * kStep + lane;
  auto lookup = [&](int j) { return lane < kStep ? pool_slot(a, table, first + j * kWarps * kStep, w.end) : -1; };
  auto stage_k = [&](int st_) { return ks + st_ * S::kK * kThreads; };
  auto stage_v = [&](int st_) { return vs + st_ * S::kV * kThreads; };
  unsigned visible = 0;  // 4 bits per stage
  int slot = steps > 0 ? lookup(0) : -1;
#pragma unroll
  for (int j = 0; j < kStages - 1; ++j) {
    if (j < steps) {
      visible |= issue<D>(stage_k(j), stage_v(j), slot, kc, vc, token_bytes) << (4 * j);
      if (j + 1 < steps) slot = lookup(j + 1);
    }
    cp_async_commit();
  }
  for (int j = 0; j < steps; ++j) {
    const int ahead = j + kStages - 1;
    if (ahead < steps) {
      const int sa = ahead % kStages;
      const unsigned bits = issue<D>(stage_k(sa), stage_v(sa), slot, kc, vc, token_bytes);
      visible = (visible & ~(0xfu << (4 * sa))) | (bits << (4 * sa));
      if (ahead + 1 < steps) slot = lookup(ahead + 1);
    }
    cp_async_commit();
    cp_async_wait<kStages - 1>();  // step j has landed (this thread's own copies)
    const int sj = j % kStages;
    step<D>(st, q, stage_k(sj), stage_v(sj), (visible >> (4 * sj)) & 0xfu, a.scale_log2);
  }
  cp_async_wait<0>();
  st.l += __shfl_xor_sync(0xffffffffu, st.l, 1);
  st.l += __shfl_xor_sync(0xffffffffu, st.l, 2);
  __syncthreads();  // the merge overwrites other threads' slots
  merge<T, D>(st, a, tok, h0, heads, w.splits, smem);
}

template <typename T, int D>
void launch(const PagedAttentionArgs& a, cudaStream_t s) {
  const dim3 grid = decode_grid(a);
  constexpr size_t smem = Slots<D>::kSmem;
  static_assert(smem <= 48 * 1024, "more dynamic shared memory needs cudaFuncSetAttribute");
  launch_maybe_pdl(decode_mma_kernel<T, D, D == 128 ? 3 : 4>, grid, dim3(kThreads), smem, s, a);
  CONVEYOR_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

bool decode_mma_supports(int head_dim) { return head_dim == 64 || head_dim == 128; }

void launch_decode_mma(const PagedAttentionArgs& a, DType dt, cudaStream_t s) {
  const bool bf16 = dt == DType::kBF16;
  if (a.head_dim == 64) {
    bf16 ? launch<__nv_bfloat16, 64>(a, s) : launch<__half, 64>(a, s);
  } else {
    bf16 ? launch<__nv_bfloat16, 128>(a, s) : launch<__half, 128>(a, s);
  }
}

}  // namespace conveyor::cuda_detail
