// Paged attention reference (see attention.h). Two-pass softmax per (token, head): scores into a
// per-thread buffer sized to the longest context of the batch, max subtracted, fp32 throughout. The
// fp32 and FP8 caches share one implementation: only how a cached row becomes fp32 differs.
// All checks run before the parallel region so no exception escapes an OpenMP thread.
#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/fp8.h"
#include "runtime/core/error.h"

namespace conveyor {
namespace {

void check_shape(const PagedKvShape& s) {
  CONVEYOR_CHECK(s.num_blocks > 0 && s.block_size > 0 && s.n_kv_heads > 0 && s.head_dim > 0,
                 "attention: bad KV cache shape num_blocks=", s.num_blocks, " block_size=", s.block_size,
                 " n_kv_heads=", s.n_kv_heads, " head_dim=", s.head_dim);
}

// Checks the batch and every block-table entry that positions up to each sequence's last new
// token need. Returns the longest context (largest position + 1).
int check_batch(const AttentionBatch& b, const PagedKvShape& s) {
  CONVEYOR_CHECK(b.num_seqs >= 0 && b.query_start != nullptr, "attention: batch needs query_start");
  CONVEYOR_CHECK(b.query_start[0] == 0, "attention: query_start[0] must be 0, got ", b.query_start[0]);
  int longest = 0;
  for (int seq = 0; seq < b.num_seqs; ++seq) {
    const int begin = b.query_start[seq], end = b.query_start[seq + 1];
    CONVEYOR_CHECK(end >= begin, "attention: query_start decreases at sequence ", seq);
    int last = -1;
    for (int t = begin; t < end; ++t) {
      CONVEYOR_CHECK(b.positions[t] >= 0, "attention: negative position ", b.positions[t], " at token ", t);
      last = std::max(last, b.positions[t]);
    }
    if (last < 0) continue;
    const int blocks = last / s.block_size + 1;
    CONVEYOR_CHECK(blocks <= b.max_blocks_per_seq, "attention: sequence ", seq, " needs ", blocks,
                   " blocks for position ", last, " but its block table has ", b.max_blocks_per_seq);
    const int32_t* table = b.block_tables + static_cast<size_t>(seq) * b.max_blocks_per_seq;
    for (int i = 0; i < blocks; ++i) {
      CONVEYOR_CHECK(table[i] >= 0 && table[i] < s.num_blocks, "attention: sequence ", seq, " block table entry ",
                     i, " is ", table[i], ", outside the pool of ", s.num_blocks, " blocks");
    }
    longest = std::max(longest, last + 1);
  }
  return longest;
}

// Offset of (position, kv head) in one layer's pool.
inline size_t cache_offset(const int32_t* table, int pos, int kv_head, const PagedKvShape& s) {
  const size_t block = static_cast<size_t>(table[pos / s.block_size]);
  const size_t slot = static_cast<size_t>(pos % s.block_size);
  return block * s.block_elems() + slot * s.token_elems() + static_cast<size_t>(kv_head) * s.head_dim;
}

inline float dot(const float* a, const float* b, int n) {
  float acc = 0.f;
#pragma omp simd reduction(+ : acc)
  for (int i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

// Cached rows as fp32: an fp32 pool hands out its rows; an FP8 pool decodes a row's codes (code *
// scale) into the caller's scratch, so both run the same arithmetic on the same values.
struct F32Rows {
  const float* cache;
  const float* row(size_t off, int d, float* scratch) const {
    (void)d;
    (void)scratch;
    return cache + off;
  }
};

struct Fp8Rows {
  const uint8_t* cache;
  float scale;
  const float* row(size_t off, int d, float* scratch) const {
    const float* table = fp8_e4m3_table();
    for (int i = 0; i < d; ++i) scratch[i] = table[cache[off + i]] * scale;
    return scratch;
  }
};

// One query head of one token over positions [lo, hi] of its sequence. scratch: head_dim floats.
template <typename Rows>
void attend_one(float* out, const float* q, const Rows& k_rows, const Rows& v_rows, const int32_t* table, int kv_head,
                int lo, int hi, const PagedKvShape& s, float scale, float* scores, float* scratch) {
  const int d = s.head_dim;
  float m = -std::numeric_limits<float>::infinity();
  for (int p = lo; p <= hi; ++p) {
    const float sc = dot(q, k_rows.row(cache_offset(table, p, kv_head, s), d, scratch), d) * scale;
    scores[p - lo] = sc;
    m = std::max(m, sc);
  }
  float sum = 0.f;
  for (int p = lo; p <= hi; ++p) {
    const float e = std::exp(scores[p - lo] - m);
    scores[p - lo] = e;
    sum += e;
  }
  std::fill(out, out + d, 0.f);
  for (int p = lo; p <= hi; ++p) {
    const float w = scores[p - lo];
    const float* vr = v_rows.row(cache_offset(table, p, kv_head, s), d, scratch);
#pragma omp simd
    for (int i = 0; i < d; ++i) out[i] += w * vr[i];
  }
  const float inv = 1.f / sum;
  for (int i = 0; i < d; ++i) out[i] *= inv;
}

void check_params(const PagedKvShape& shape, const AttentionParams& params) {
  check_shape(shape);
  CONVEYOR_CHECK(params.n_heads > 0 && params.n_heads % shape.n_kv_heads == 0, "attention: n_heads ",
                 params.n_heads, " is not a positive multiple of n_kv_heads ", shape.n_kv_heads);
  CONVEYOR_CHECK(params.scale > 0.f && std::isfinite(params.scale), "attention: scale must be > 0, got ",
                 params.scale);
  CONVEYOR_CHECK(params.sliding_window >= 0, "attention: sliding_window must be >= 0, got ", params.sliding_window);
}

void check_scales(const KvScales& s) {
  CONVEYOR_CHECK(std::isfinite(s.k) && s.k > 0.f && std::isfinite(s.v) && s.v > 0.f,
                 "attention: FP8 KV scales must be finite and > 0, got k_scale ", s.k, ", v_scale ", s.v);
}

template <typename Rows>
void paged_attention_impl(float* out, const float* q, const Rows& k_rows, const Rows& v_rows,
                          const AttentionBatch& batch, const PagedKvShape& shape, const AttentionParams& params) {
  check_params(shape, params);
  const int longest = check_batch(batch, shape);
  const int tokens = batch.tokens();
  const int n_heads = params.n_heads;
  const int group = n_heads / shape.n_kv_heads;
  const int d = shape.head_dim;

  // Which sequence each token belongs to, so the flat (token, head) loop can find its block table.
  std::vector<int32_t> seq_of(static_cast<size_t>(tokens));
  for (int seq = 0; seq < batch.num_seqs; ++seq)
    for (int t = batch.query_start[seq]; t < batch.query_start[seq + 1]; ++t) seq_of[t] = seq;

  const long long work = static_cast<long long>(tokens) * n_heads;
#pragma omp parallel if (work * longest > 4096)
  {
    std::vector<float> scores(static_cast<size_t>(std::max(longest, 1)));
    std::vector<float> scratch(static_cast<size_t>(d));
#pragma omp for schedule(dynamic, 4)
    for (long long i = 0; i < work; ++i) {
      const int t = static_cast<int>(i / n_heads);
      const int h = static_cast<int>(i % n_heads);
      const int pos = batch.positions[t];
      const int lo = params.sliding_window > 0 ? std::max(0, pos - params.sliding_window + 1) : 0;
      const int32_t* table = batch.block_tables + static_cast<size_t>(seq_of[t]) * batch.max_blocks_per_seq;
      const size_t off = (static_cast<size_t>(t) * n_heads + h) * d;
      attend_one(out + off, q + off, k_rows, v_rows, table, h / group, lo, pos, shape, params.scale, scores.data(),
                 scratch.data());
    }
  }
}

// Calls store(cache offset of token t's row, t) for every new token, after checking everything.
template <typename Store>
void for_each_new_row(const AttentionBatch& batch, const PagedKvShape& shape, Store store) {
  check_shape(shape);
  check_batch(batch, shape);
  for (int seq = 0; seq < batch.num_seqs; ++seq) {
    const int32_t* table = batch.block_tables + static_cast<size_t>(seq) * batch.max_blocks_per_seq;
    for (int t = batch.query_start[seq]; t < batch.query_start[seq + 1]; ++t)
      store(cache_offset(table, batch.positions[t], 0, shape), static_cast<size_t>(t));
  }
}

}  // namespace

void write_kv_cache_ref(float* k_cache, float* v_cache, const float* k, const float* v, const AttentionBatch& batch,
                        const PagedKvShape& shape) {
  const size_t row = shape.token_elems();
  for_each_new_row(batch, shape, [&](size_t dst, size_t t) {
    std::memcpy(k_cache + dst, k + t * row, row * sizeof(float));
    std::memcpy(v_cache + dst, v + t * row, row * sizeof(float));
  });
}

void paged_attention_ref(float* out, const float* q, const float* k_cache, const float* v_cache,
                         const AttentionBatch& batch, const PagedKvShape& shape, const AttentionParams& params) {
  paged_attention_impl(out, q, F32Rows{k_cache}, F32Rows{v_cache}, batch, shape, params);
}

void attention_ref(float* out, const float* q, const float* k, const float* v, float* k_cache, float* v_cache,
                   const AttentionBatch& batch, const PagedKvShape& shape, const AttentionParams& params) {
  write_kv_cache_ref(k_cache, v_cache, k, v, batch, shape);
  paged_attention_ref(out, q, k_cache, v_cache, batch, shape, params);
}

void write_kv_cache_fp8_ref(uint8_t* k_cache, uint8_t* v_cache, const float* k, const float* v,
                            const AttentionBatch& batch, const PagedKvShape& shape, const KvScales& scales) {
  check_scales(scales);
  const size_t row = shape.token_elems();
  for_each_new_row(batch, shape, [&](size_t dst, size_t t) {
    quantize_fp8_static_ref(k_cache + dst, k + t * row, static_cast<int64_t>(row), scales.k);
    quantize_fp8_static_ref(v_cache + dst, v + t * row, static_cast<int64_t>(row), scales.v);
  });
}

void paged_attention_fp8_ref(float* out, const float* q, const uint8_t* k_cache, const uint8_t* v_cache,
                             const AttentionBatch& batch, const PagedKvShape& shape, const AttentionParams& params,
                             const KvScales& scales) {
  check_scales(scales);
  paged_attention_impl(out, q, Fp8Rows{k_cache, scales.k}, Fp8Rows{v_cache, scales.v}, batch, shape, params);
}

void attention_fp8_ref(float* out, const float* q, const float* k, const float* v, uint8_t* k_cache,
                       uint8_t* v_cache, const AttentionBatch& batch, const PagedKvShape& shape,
                       const AttentionParams& params, const KvScales& scales) {
  write_kv_cache_fp8_ref(k_cache, v_cache, k, v, batch, shape, scales);
  paged_attention_fp8_ref(out, q, k_cache, v_cache, batch, shape, params, scales);
}

}  // namespace conveyor
