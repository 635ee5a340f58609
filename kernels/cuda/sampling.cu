// CUDA twin of runtime/sampling/sampler.cpp's pipeline (see sampling.h). Kernels, in stream order:
//   prepare  (grid-stride, all rows but direct ones): work = logits / T, NaN/+inf detection
//   penalty  (one thread per touched (row, token)): penalties and the min_tokens mask from the raw logit
//   keys     (rows with top-k/top-p): order-preserving uint32 keys, then CUB's stable segmented sort,
//            descending, so equal logits keep ascending ids: the CPU's (logit desc, id asc) order
//   select   (one block per row): greedy argmax, or top-k/top-p/min-p + Gumbel-max; raw logprobs. A direct row
//            (greedy, no penalty) takes its argmax and the NaN/+inf check from the logits in one pass
// Float operations that nvcc could contract into FMAs are spelled with _rn intrinsics, because the
// CPU build does not contract and a fused rounding would move a logit by one ulp.
#include "kernels/cuda/sampling.h"

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_segmented_radix_sort.cuh>
#include <math_constants.h>

#include <algorithm>
#include <climits>
#include <limits>

#include "runtime/core/cuda_buffer.h"
#include "runtime/core/cuda_check.h"
#include "runtime/core/error.h"

namespace conveyor {

namespace {

constexpr int kSelectThreads = 512;
constexpr int kElemThreads = 256;
constexpr int64_t kPenaltyChunk = int64_t{1} << 16;  // penalty entries per upload (1 MiB)
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int32_t kNoToken = INT_MAX;
constexpr int kPenaltyRepetition = 1;  // in the prompt or outputs, repetition_penalty != 1
constexpr int kPenaltyOutput = 2;      // in the outputs, frequency or presence penalty != 0
constexpr int kPenaltyMask = 4;        // EOS or stop id while min_tokens is active

// --- counter-based randomness: the same integer and double operations as runtime/sampling/sampler.cpp ------
__host__ __device__ inline uint64_t mix64_hd(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
__device__ inline uint64_t step_key_d(uint64_t seed, uint64_t step) { return mix64_hd(mix64_hd(seed) ^ step); }
__device__ inline double uniform_from_key_d(uint64_t key, uint64_t token) {
  const uint64_t bits = mix64_hd(key ^ token);
  return __dmul_rn(static_cast<double>(bits >> 11) + 0.5, 0x1.0p-53);
}
__device__ inline double neg_gumbel(double u) { return log(-log(u)); }

__host__ __device__ inline bool is_greedy(const SamplingRowParams& p) { return !(p.temperature > 0.f); }
__host__ __device__ inline bool needs_sort(const SamplingRowParams& p, int64_t vocab) {
  return !is_greedy(p) && ((p.top_k > 0 && p.top_k < vocab) || p.top_p < 1.0);
}

// Larger float -> larger key; -0 and +0 share a key because the CPU compares them equal.
__device__ inline uint32_t order_key(float x) {
  uint32_t u = __float_as_uint(x);
  if (u == 0x80000000u) u = 0;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ inline float key_value(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7FFFFFFFu) : ~k);
}
constexpr uint32_t kNegInfKey = ~0xFF800000u;  // order_key(-inf)

// --- block reductions (results broadcast to every thread) ------------------------------------------
struct Best {
  double score;
  int32_t id;
};
// A total order: higher score first, lower id on ties, so any reduction tree gives the same winner.
__device__ inline Best better(Best a, Best b) {
  return (b.score > a.score || (b.score == a.score && b.id < a.id)) ? b : a;
}
__device__ inline Best none() { return Best{-CUDART_INF, kNoToken}; }
struct BetterOp {
  __device__ Best operator()(const Best& a, const Best& b) const { return better(a, b); }
};

using BlockBest = cub::BlockReduce<Best, kSelectThreads>;
using BlockSumD = cub::BlockReduce<double, kSelectThreads>;
using BlockSumI = cub::BlockReduce<int64_t, kSelectThreads>;
using BlockScanD = cub::BlockScan<double, kSelectThreads>;

struct Shared {
  union {
    typename BlockBest::TempStorage best;
    typename BlockSumD::TempStorage sum_d;
    typename BlockSumI::TempStorage sum_i;
    typename BlockScanD::TempStorage scan;
  } tmp;
  Best best;
  double d;
  int64_t i;
};

__device__ Best block_best(Best v, Shared& s) {
  const Best r = BlockBest(s.tmp.best).Reduce(v, BetterOp{});
  if (threadIdx.x == 0) s.best = r;
  __syncthreads();
  const Best out = s.best;
  __syncthreads();
  return out;
}
__device__ double block_sum(double v, Shared& s) {
  const double r = BlockSumD(s.tmp.sum_d).Sum(v);
  if (threadIdx.x == 0) s.d = r;
  __syncthreads();
  const double out = s.d;
  __syncthreads();
  return out;
}
__device__ int64_t block_count(int64_t v, Shared& s) {
  const int64_t r = BlockSumI(s.tmp.sum_i).Sum(v);
  if (threadIdx.x == 0) s.i = r;
  __syncthreads();
  const int64_t out = s.i;
  __syncthreads();
  return out;
}

// --- elementwise kernels -----------------------------------------------------------------------------
// grid (chunks, rows). work = logits (greedy) or logits / T; bad_token[row] = lowest non-finite id. Direct rows
// (greedy, no penalty: CudaSampler::mark_direct) are skipped: select_kernel reads their logits and checks them.
__global__ void prepare_kernel(const float* logits, float* work, const SamplingRowParams* params, const int* direct,
                               int64_t vocab, int* bad_token) {
  const int64_t row = blockIdx.y;
  if (direct[row]) return;
  const SamplingRowParams p = params[row];
  const bool greedy = is_greedy(p);
  const float* in = logits + row * vocab;
  float* out = work + row * vocab;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < vocab; i += int64_t(gridDim.x) * blockDim.x) {
    const float x = in[i];
    if (isnan(x) || x == -kNegInf) atomicMin(bad_token + row, static_cast<int>(i));
    out[i] = greedy ? x : __fdiv_rn(x, p.temperature);
  }
}

// One thread per entry: recomputes the touched logit from the raw one in the CPU's order
// (repetition, frequency, presence, mask, temperature).
__global__ void penalty_kernel(const float* logits, float* work, const SamplingRowParams* params, int64_t vocab,
                               const CudaSampler::Penalty* entries, int64_t n) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= n) return;
  const CudaSampler::Penalty pen = entries[e];
  const SamplingRowParams& p = params[pen.row];
  const int64_t at = int64_t(pen.row) * vocab + pen.token;
  float x = logits[at];
  if (pen.flags & kPenaltyRepetition) {
    x = x > 0.f ? __fdiv_rn(x, p.repetition_penalty) : __fmul_rn(x, p.repetition_penalty);
  }
  if (pen.flags & kPenaltyOutput) {
    x = __fsub_rn(x, __fmul_rn(p.frequency_penalty, static_cast<float>(pen.count)));
    x = __fsub_rn(x, p.presence_penalty);
  }
  if (pen.flags & kPenaltyMask) x = kNegInf;
  if (!is_greedy(p)) x = __fdiv_rn(x, p.temperature);
  work[at] = x;
}

// grid (chunks, rows): keys and ids of the rows that sort; other rows are skipped (empty segments).
__global__ void keys_kernel(const float* work, uint32_t* keys, int32_t* ids, const SamplingRowParams* params,
                            int64_t vocab) {
  const int64_t row = blockIdx.y;
  if (!needs_sort(params[row], vocab)) return;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < vocab; i += int64_t(gridDim.x) * blockDim.x) {
    keys[row * vocab + i] = order_key(work[row * vocab + i]);
    ids[row * vocab + i] = static_cast<int32_t>(i);
  }
}

__global__ void noise_kernel(const uint64_t* seed, const uint64_t* step, const uint64_t* token, int64_t n,
                             double* out_uniform, double* out_gumbel) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const double u = uniform_from_key_d(step_key_d(seed[i], step[i]), token[i]);
  out_uniform[i] = u;
  out_gumbel[i] = -neg_gumbel(u);
}

// --- per-row selection (one block per row) -------------------------------------------------------
// The row's argmax in (score desc, id asc) order, so the traversal does not matter; 16-byte loads where the row
// allows. bad: for a direct row (its logits, which prepare_kernel skipped), where the lowest NaN / +inf id goes.
__device__ int32_t greedy_token(const float* w, int64_t vocab, Shared& s, int* bad) {
  Best b = none();
  auto take = [&](float x, int64_t i) {
    if (bad != nullptr && (isnan(x) || x == -kNegInf)) atomicMin(bad, static_cast<int>(i));
    if (x != kNegInf) b = better(b, Best{x, static_cast<int32_t>(i)});
  };
  if (vocab % 4 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0) {
    const auto* w4 = reinterpret_cast<const float4*>(w);
    for (int64_t i = threadIdx.x; i < vocab / 4; i += kSelectThreads) {
      const float4 v = w4[i];
      take(v.x, 4 * i);
      take(v.y, 4 * i + 1);
      take(v.z, 4 * i + 2);
      take(v.w, 4 * i + 3);
    }
  } else {
    for (int64_t i = threadIdx.x; i < vocab; i += kSelectThreads) take(w[i], i);
  }
  return block_best(b, s).id;
}

// No top-k / top-p: min-p against the row's max, then Gumbel-max over token ids.
__device__ int32_t sample_unsorted(const float* w, int64_t vocab, const SamplingRowParams& p, Shared& s) {
  Best mx = none();
  for (int64_t i = threadIdx.x; i < vocab; i += kSelectThreads) {
    if (w[i] != kNegInf) mx = better(mx, Best{w[i], static_cast<int32_t>(i)});
  }
  mx = block_best(mx, s);
  if (mx.id == kNoToken) return kNoToken;
  const double m = mx.score;
  const uint64_t key = step_key_d(p.seed, p.step);
  Best b = none();
  for (int64_t i = threadIdx.x; i < vocab; i += kSelectThreads) {
    const float y = w[i];
    if (y == kNegInf) continue;
    if (p.min_p > 0.0 && exp(static_cast<double>(y) - m) < p.min_p) continue;
    const double score = static_cast<double>(y) - neg_gumbel(uniform_from_key_d(key, static_cast<uint64_t>(i)));
    b = better(b, Best{score, static_cast<int32_t>(i)});
  }
  return block_best(b, s).id;
}

// Top-p over sorted positions [0, n_valid): how many positions have an exclusive prefix mass below
// p * total (the CPU keeps a token while the mass strictly before it is below the budget).
__device__ int64_t top_p_count(const uint32_t* keys, int64_t n_valid, double top_p, Shared& s) {
  const double m = key_value(keys[0]);
  double part = 0.0;
  for (int64_t i = threadIdx.x; i < n_valid; i += kSelectThreads) part += exp(static_cast<double>(key_value(keys[i])) - m);
  const double budget = top_p * block_sum(part, s);
  double carry = 0.0;
  int64_t kept = 0;
  for (int64_t base = 0; base < n_valid; base += kSelectThreads) {
    const int64_t i = base + threadIdx.x;
    const double mass = i < n_valid ? exp(static_cast<double>(key_value(keys[i])) - m) : 0.0;
    double before = 0.0;
    double tile = 0.0;
    BlockScanD(s.tmp.scan).ExclusiveSum(mass, before, tile);
    __syncthreads();
    before += carry;
    kept += block_count(i < n_valid && before < budget ? 1 : 0, s);
    carry += tile;
    if (carry >= budget) break;  // every later position starts at or past the budget
  }
  return kept;
}

// Top-k and/or top-p on the row's sorted keys, then min-p and Gumbel-max over the kept prefix.
__device__ int32_t sample_sorted(const uint32_t* keys, const int32_t* ids, int64_t vocab, const SamplingRowParams& p,
                                 Shared& s) {
  const int64_t k0 = (p.top_k > 0 && p.top_k < vocab) ? p.top_k : vocab;
  // Removed tokens (-inf) sort last; the CPU's top-p and min-p ignore them.
  int64_t part = 0;
  for (int64_t i = threadIdx.x; i < k0; i += kSelectThreads) part += keys[i] != kNegInfKey ? 1 : 0;
  const int64_t n_valid = block_count(part, s);
  if (n_valid == 0) return kNoToken;
  const int64_t kept = p.top_p < 1.0 ? top_p_count(keys, n_valid, p.top_p, s) : n_valid;
  const double m = key_value(keys[0]);
  const uint64_t key = step_key_d(p.seed, p.step);
  Best b = none();
  for (int64_t i = threadIdx.x; i < kept; i += kSelectThreads) {
    const double y = key_value(keys[i]);
    if (p.min_p > 0.0 && exp(y - m) < p.min_p) continue;
    const int32_t id = ids[i];
    b = better(b, Best{y - neg_gumbel(uniform_from_key_d(key, static_cast<uint64_t>(id))), id});
  }
  return block_best(b, s).id;
}

// Raw logprobs of the row (before penalties and temperature), as Sampler::fill_logprobs.
__device__ void fill_logprobs(const float* x, int64_t vocab, int32_t token, int n_top, SampledToken* out, Shared& s) {
  float pm = kNegInf;
  for (int64_t i = threadIdx.x; i < vocab; i += kSelectThreads) pm = fmaxf(pm, x[i]);
  const float m = static_cast<float>(block_best(Best{pm, 0}, s).score);
  double part = 0.0;
  for (int64_t i = threadIdx.x; i < vocab; i += kSelectThreads) part += exp(static_cast<double>(x[i]) - m);
  const double log_z = m + log(block_sum(part, s));
  const float chosen = x[token];
  int64_t above = 0;
  for (int64_t i = threadIdx.x; i < vocab; i += kSelectThreads) above += x[i] > chosen ? 1 : 0;
  above = block_count(above, s);
  if (threadIdx.x == 0) {
    out->logprob = static_cast<float>(x[token] - log_z);
    out->rank = 1 + above;
    out->num_top = static_cast<int32_t>(n_top < vocab ? n_top : vocab);
  }
  // The next best strictly after `prev` in (logit desc, id asc) order, n_top times (n_top <= 20).
  Best prev = none();
  for (int j = 0; j < n_top && j < vocab; ++j) {
    Best b = none();
    for (int64_t i = threadIdx.x; i < vocab; i += kSelectThreads) {
      const double v = x[i];
      const bool after = j == 0 || v < prev.score || (v == prev.score && i > prev.id);
      if (after) b = better(b, Best{v, static_cast<int32_t>(i)});
    }
    prev = block_best(b, s);
    if (threadIdx.x == 0) {
      out->top_ids[j] = prev.id;
      out->top_logprobs[j] = static_cast<float>(x[prev.id] - log_z);
    }
  }
}

__global__ void __launch_bounds__(kSelectThreads)
    select_kernel(const float* logits, const float* work, const uint32_t* keys, const int32_t* ids,
                  const SamplingRowParams* params, const int* direct, int64_t vocab, SampledToken* out,
                  int* bad_token) {
  __shared__ Shared s;
  const int64_t row = blockIdx.x;
  const SamplingRowParams p = params[row];
  int32_t token;
  if (direct[row]) {
    token = greedy_token(logits + row * vocab, vocab, s, bad_token + row);
  } else if (is_greedy(p)) {
    token = greedy_token(work + row * vocab, vocab, s, nullptr);
  } else if (needs_sort(p, vocab)) {
    token = sample_sorted(keys + row * vocab, ids + row * vocab, vocab, p, s);
  } else {
    token = sample_unsorted(work + row * vocab, vocab, p, s);
  }
  SampledToken* o = out + row;
  if (threadIdx.x == 0) {
    o->token = token == kNoToken ? -1 : token;
    o->logprob = 0.f;
    o->rank = 0;
    o->num_top = 0;
  }
  if (p.num_logprobs >= 0 && token != kNoToken) fill_logprobs(logits + row * vocab, vocab, token, p.num_logprobs, o, s);
}

unsigned elem_blocks(int64_t vocab) {
  return static_cast<unsigned>(std::min<int64_t>((vocab + kElemThreads * 4 - 1) / (kElemThreads * 4), 1024));
}

}  // namespace

void sampling_noise_cuda(const uint64_t* seed, const uint64_t* step, const uint64_t* token, int64_t n,
                         double* out_uniform, double* out_gumbel, cudaStream_t stream) {
  CONVEYOR_CHECK(n >= 0 && n <= (int64_t(1) << 31) * kElemThreads, "sampling_noise_cuda: n = ", n, " out of range");
  if (n == 0) return;
  const unsigned blocks = static_cast<unsigned>((n + kElemThreads - 1) / kElemThreads);
  noise_kernel<<<blocks, kElemThreads, 0, stream>>>(seed, step, token, n, out_uniform, out_gumbel);
  CONVEYOR_CUDA_CHECK(cudaGetLastError());
}

namespace {

// CUB's scratch for one segmented sort over every row: queried, never allocated.
size_t sort_temp_bytes(int64_t vocab, int max_rows) {
  const int n = static_cast<int>(vocab * max_rows);
  cub::DoubleBuffer<uint32_t> keys(nullptr, nullptr);
  cub::DoubleBuffer<int32_t> ids(nullptr, nullptr);
  size_t bytes = 0;
  CONVEYOR_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(
      nullptr, bytes, keys, ids, n, max_rows, static_cast<const int*>(nullptr), static_cast<const int*>(nullptr)));
  return std::max<size_t>(bytes, 16);
}

void check_sampler_shape(int64_t vocab, int max_rows) {
  CONVEYOR_CHECK(vocab > 0 && max_rows > 0, "CudaSampler needs vocab > 0 and max_rows > 0, got ", vocab, " and ",
                 max_rows);
  CONVEYOR_CHECK(vocab * max_rows < INT_MAX && max_rows <= 65535, "CudaSampler: ", max_rows, " rows of ", vocab,
                 " logits exceed the sort's 32-bit index space; sample in smaller batches");
}

}  // namespace

// The one layout of the workspace: the sizing function and the constructor both walk it.
struct CudaSampler::Layout {
  static void carve(CudaSampler& s, WorkspaceCarver& c) {
    const size_t n = static_cast<size_t>(s.vocab_) * s.max_rows_;
    const size_t rows = static_cast<size_t>(s.max_rows_);
    s.work_ = c.take<float>(n, "CudaSampler");
    for (int b = 0; b < 2; ++b) {
      s.keys_[b] = c.take<uint32_t>(n, "CudaSampler");
      s.ids_[b] = c.take<int32_t>(n, "CudaSampler");
    }
    s.sort_temp_ = c.take<char>(s.sort_temp_bytes_, "CudaSampler");
    s.seg_begin_ = c.take<int>(rows, "CudaSampler");
    s.seg_end_ = c.take<int>(rows, "CudaSampler");
    s.d_params_ = c.take<SamplingRowParams>(rows, "CudaSampler");
    s.d_bad_token_ = c.take<int>(rows, "CudaSampler");
    s.d_direct_ = c.take<int>(rows, "CudaSampler");
    s.d_penalties_ = c.take<Penalty>(static_cast<size_t>(kPenaltyChunk), "CudaSampler");
    s.d_out_ = c.take<SampledToken>(rows, "CudaSampler");
  }
};

size_t cuda_sampler_workspace_bytes(int64_t vocab, int max_rows) {
  check_sampler_shape(vocab, max_rows);
  CudaSampler shape(vocab, max_rows);  // owns nothing: only walks the layout
  WorkspaceCarver c = WorkspaceCarver::sizing();
  CudaSampler::Layout::carve(shape, c);
  return c.used();
}

CudaSampler::CudaSampler(int64_t vocab, int max_rows)
    : vocab_(vocab), max_rows_(max_rows), sort_temp_bytes_(sort_temp_bytes(vocab, max_rows)) {}

CudaSampler::CudaSampler(int64_t vocab, int max_rows, std::vector<int32_t> eos_ids, void* workspace,
                         size_t workspace_bytes)
    : vocab_(vocab), max_rows_(max_rows) {
  check_sampler_shape(vocab, max_rows);
  set_eos_ids(std::move(eos_ids));
  sort_temp_bytes_ = sort_temp_bytes(vocab, max_rows);
  CONVEYOR_CHECK(workspace != nullptr, "CudaSampler: no workspace; allocate cuda_sampler_workspace_bytes(", vocab, ", ",
                 max_rows, ") bytes at start-up and pass them in");
  WorkspaceCarver c(workspace, workspace_bytes);
  Layout::carve(*this, c);
  CONVEYOR_CUDA_CHECK(cudaMallocHost(&h_out_, max_rows * sizeof(SampledToken)));
  CONVEYOR_CUDA_CHECK(cudaMallocHost(&h_bad_token_, max_rows * sizeof(int)));
  h_seg_begin_.resize(max_rows);
  h_seg_end_.resize(max_rows);
  h_direct_.resize(max_rows);
}

CudaSampler::~CudaSampler() {
  // Destructors do not throw: errors here would only hide the one that unwound the stack. The
  // device buffers belong to the caller's workspace.
  if (h_out_) cudaFreeHost(h_out_);
  if (h_bad_token_) cudaFreeHost(h_bad_token_);
}

void CudaSampler::set_eos_ids(std::vector<int32_t> eos_ids) {
  for (int32_t id : eos_ids) {
    CONVEYOR_CHECK(id >= 0 && id < vocab_, "EOS token id ", id, " is outside the vocabulary [0, ", vocab_,
                   "); check the model's generation_config");
  }
  eos_ids_ = std::move(eos_ids);
}

std::pair<const uint32_t*, const int32_t*> CudaSampler::sort_rows(int rows, const std::vector<SamplingRowParams>& params,
                                                                   cudaStream_t stream) {
  int sorted = 0;
  for (int r = 0; r < rows; ++r) {
    const bool sort = needs_sort(params[r], vocab_);
    h_seg_begin_[r] = static_cast<int>(r * vocab_);
    h_seg_end_[r] = static_cast<int>((sort ? r + 1 : r) * vocab_);
    sorted += sort ? 1 : 0;
  }
  if (sorted == 0) return {nullptr, nullptr};
  CONVEYOR_CUDA_CHECK(cudaMemcpyAsync(seg_begin_, h_seg_begin_.data(), rows * sizeof(int), cudaMemcpyHostToDevice, stream));
  CONVEYOR_CUDA_CHECK(cudaMemcpyAsync(seg_end_, h_seg_end_.data(), rows * sizeof(int), cudaMemcpyHostToDevice, stream));
  keys_kernel<<<dim3(elem_blocks(vocab_), rows), kElemThreads, 0, stream>>>(work_, keys_[0], ids_[0], d_params_, vocab_);
  CONVEYOR_CUDA_CHECK(cudaGetLastError());
  cub::DoubleBuffer<uint32_t> keys(keys_[0], keys_[1]);
  cub::DoubleBuffer<int32_t> ids(ids_[0], ids_[1]);
  const int n = static_cast<int>(rows * vocab_);
  size_t need = 0;
  CONVEYOR_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(
      nullptr, need, keys, ids, n, rows, static_cast<const int*>(seg_begin_), static_cast<const int*>(seg_end_)));
  CONVEYOR_CHECK(need <= sort_temp_bytes_, "CudaSampler: the sort needs ", need, " bytes of scratch, ",
                 sort_temp_bytes_, " were reserved for ", max_rows_, " rows");
  size_t have = sort_temp_bytes_;
  CONVEYOR_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(
      sort_temp_, have, keys, ids, n, rows, static_cast<const int*>(seg_begin_), static_cast<const int*>(seg_end_), 0,
      32, stream));
  return {keys.Current(), ids.Current()};
}

int CudaSampler::mark_direct(int rows, const std::vector<SamplingRowParams>& params,
                             const std::vector<Penalty>& entries, cudaStream_t stream) {
  for (int r = 0; r < rows; ++r) h_direct_[r] = is_greedy(params[r]) ? 1 : 0;
  for (const Penalty& e : entries) h_direct_[e.row] = 0;
  CONVEYOR_CUDA_CHECK(cudaMemcpyAsync(d_direct_, h_direct_.data(), rows * sizeof(int), cudaMemcpyHostToDevice, stream));
  return static_cast<int>(std::count(h_direct_.begin(), h_direct_.begin() + rows, 1));
}

void CudaSampler::apply_penalties(const float* logits, const std::vector<Penalty>& entries, cudaStream_t stream) {
  // Each (row, token) appears once, so the chunks touch disjoint logits: the result is the one
  // launch's. The next chunk's copy is ordered after the kernel that reads the previous one.
  const int64_t total = static_cast<int64_t>(entries.size());
  for (int64_t first = 0; first < total; first += kPenaltyChunk) {
    const int64_t n = std::min(kPenaltyChunk, total - first);
    CONVEYOR_CUDA_CHECK(cudaMemcpyAsync(d_penalties_, entries.data() + first, n * sizeof(Penalty),
                                        cudaMemcpyHostToDevice, stream));
    penalty_kernel<<<static_cast<unsigned>((n + kElemThreads - 1) / kElemThreads), kElemThreads, 0, stream>>>(
        logits, work_, d_params_, vocab_, d_penalties_, n);
    CONVEYOR_CUDA_CHECK(cudaGetLastError());
  }
}

std::vector<CudaSampler::Penalty> CudaSampler::build_penalties(
    int rows, const std::vector<SamplingRowParams>& params, const std::vector<int64_t>& hist_offsets,
    const std::vector<int32_t>& hist_ids, const std::vector<int32_t>& num_output,
    const std::vector<int64_t>& mask_offsets, const std::vector<int32_t>& mask_ids) const {
  std::vector<Penalty> all;
  std::vector<Penalty> row_entries;
  auto check_id = [&](const char* what, int32_t id) {
    if (id < 0 || id >= vocab_) {
      CONVEYOR_THROW(what, " token id ", id, " is outside the vocabulary [0, ", vocab_,
                     "); check the request's token ids against the model");
    }
  };
  for (int r = 0; r < rows; ++r) {
    const SamplingRowParams& p = params[r];
    row_entries.clear();
    const bool rep = p.repetition_penalty != 1.f;
    const bool out = p.frequency_penalty != 0.f || p.presence_penalty != 0.f;
    const int64_t first_output = hist_offsets[r + 1] - num_output[r];
    for (int64_t i = hist_offsets[r]; i < hist_offsets[r + 1] && (rep || out); ++i) {
      const int32_t id = hist_ids[i];
      const bool is_output = out && i >= first_output;
      if (!rep && !is_output) continue;
      check_id(i >= first_output ? "output" : "prompt or output", id);
      row_entries.push_back({r, id, is_output ? 1 : 0, (rep ? kPenaltyRepetition : 0) | (is_output ? kPenaltyOutput : 0)});
    }
    for (int64_t i = mask_offsets[r]; i < mask_offsets[r + 1]; ++i) {
      check_id("stop_token_ids", mask_ids[i]);
      if (p.min_tokens_active) row_entries.push_back({r, mask_ids[i], 0, kPenaltyMask});
    }
    if (p.min_tokens_active && !p.ignore_eos) {
      for (int32_t id : eos_ids_) row_entries.push_back({r, id, 0, kPenaltyMask});
    }
    // One entry per token: counts add up, flags combine.
    std::sort(row_entries.begin(), row_entries.end(), [](const Penalty& a, const Penalty& b) { return a.token < b.token; });
    for (const Penalty& e : row_entries) {
      if (!all.empty() && all.back().row == r && all.back().token == e.token) {
        all.back().count += e.count;
        all.back().flags |= e.flags;
      } else {
        all.push_back(e);
      }
    }
  }
  return all;
}

std::vector<SampledToken> CudaSampler::sample(const float* logits, int rows, const std::vector<SamplingRowParams>& params,
                                              const std::vector<int64_t>& hist_offsets,
                                              const std::vector<int32_t>& hist_ids,
                                              const std::vector<int32_t>& num_output,
                                              const std::vector<int64_t>& mask_offsets,
                                              const std::vector<int32_t>& mask_ids, cudaStream_t stream) {
  CONVEYOR_CHECK(rows >= 1 && rows <= max_rows_, "CudaSampler::sample: ", rows, " rows, the sampler was built for 1..",
                 max_rows_);
  CONVEYOR_CHECK(params.size() == size_t(rows) && num_output.size() == size_t(rows) &&
                     hist_offsets.size() == size_t(rows) + 1 && mask_offsets.size() == size_t(rows) + 1,
                 "CudaSampler::sample: params, num_output need ", rows, " entries and the offsets ", rows + 1);
  for (int r = 0; r < rows; ++r) {
    CONVEYOR_CHECK(hist_offsets[r] >= 0 && hist_offsets[r] <= hist_offsets[r + 1] &&
                       hist_offsets[r + 1] <= int64_t(hist_ids.size()) && num_output[r] >= 0 &&
                       num_output[r] <= hist_offsets[r + 1] - hist_offsets[r],
                   "CudaSampler::sample: row ", r, " has a bad history range or output count");
    CONVEYOR_CHECK(mask_offsets[r] >= 0 && mask_offsets[r] <= mask_offsets[r + 1] &&
                       mask_offsets[r + 1] <= int64_t(mask_ids.size()),
                   "CudaSampler::sample: row ", r, " has a bad mask range");
    CONVEYOR_CHECK(params[r].num_logprobs >= -1 && params[r].num_logprobs <= kMaxSampledLogprobs,
                   "CudaSampler::sample: row ", r, " asks for ", params[r].num_logprobs, " logprobs, at most ",
                   kMaxSampledLogprobs);
  }
  const std::vector<Penalty> entries =
      build_penalties(rows, params, hist_offsets, hist_ids, num_output, mask_offsets, mask_ids);
  CONVEYOR_CUDA_CHECK(cudaMemcpyAsync(d_params_, params.data(), rows * sizeof(SamplingRowParams),
                                      cudaMemcpyHostToDevice, stream));
  CONVEYOR_CUDA_CHECK(cudaMemsetAsync(d_bad_token_, 0x7F, rows * sizeof(int), stream));  // 0x7F7F7F7F: none
  // Round 22 (H100, batch 256 greedy): the copy of all logits took 109 us a step; a launch whose rows all skip, 22.
  if (mark_direct(rows, params, entries, stream) < rows) {
    prepare_kernel<<<dim3(elem_blocks(vocab_), rows), kElemThreads, 0, stream>>>(logits, work_, d_params_, d_direct_,
                                                                                 vocab_, d_bad_token_);
    CONVEYOR_CUDA_CHECK(cudaGetLastError());
  }
  apply_penalties(logits, entries, stream);
  const auto sorted = sort_rows(rows, params, stream);
  select_kernel<<<rows, kSelectThreads, 0, stream>>>(logits, work_, sorted.first, sorted.second, d_params_,
                                                     d_direct_, vocab_, d_out_, d_bad_token_);
  CONVEYOR_CUDA_CHECK(cudaGetLastError());
  CONVEYOR_CUDA_CHECK(cudaMemcpyAsync(h_out_, d_out_, rows * sizeof(SampledToken), cudaMemcpyDeviceToHost, stream));
  CONVEYOR_CUDA_CHECK(cudaMemcpyAsync(h_bad_token_, d_bad_token_, rows * sizeof(int), cudaMemcpyDeviceToHost, stream));
  CONVEYOR_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (int r = 0; r < rows; ++r) {
    CONVEYOR_CHECK(h_bad_token_[r] == 0x7F7F7F7F, "the model produced a NaN or +inf logit for token ", h_bad_token_[r],
                   " of row ", r, "; non-finite logits mean the forward pass overflowed or read bad weights");
    CONVEYOR_CHECK(h_out_[r].token >= 0, "every token of the vocabulary (", vocab_, ") of row ", r,
                   " was removed before sampling; min_tokens masks EOS and stop_token_ids, is that all of it?");
  }
  return std::vector<SampledToken>(h_out_, h_out_ + rows);
}

}  // namespace conveyor
