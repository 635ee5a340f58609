// Paged attention reference (see attention.h). Two-pass softmax per (token, head): scores into a
// per-thread buffer sized to the longest context of the batch, max subtracted, fp32 throughout.
// All checks run before the parallel region so no exception escapes an OpenMP thread.
#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

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

// One query head of one token over positions [lo, hi] of its sequence.
void attend_one(float* out, const float* q, const float* k_cache, const float* v_cache, const int32_t* table,
                int kv_head, int lo, int hi, const PagedKvShape& s, float scale, float* scores) {
  const int d = s.head_dim;
  float m = -std::numeric_limits<float>::infinity();
  for (int p = lo; p <= hi; ++p) {
    const float sc = dot(q, k_cache + cache_offset(table, p, kv_head, s), d) * scale;
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
    const float* vr = v_cache + cache_offset(table, p, kv_head, s);
#pragma omp simd
    for (int i = 0; i < d; ++i) out[i] += w * vr[i];
  }
  const float inv = 1.f / sum;
  for (int i = 0; i < d; ++i) out[i] *= inv;
}

}  // namespace

void write_kv_cache_ref(float* k_cache, float* v_cache, const float* k, const float* v, const AttentionBatch& batch,
                        const PagedKvShape& shape) {
  check_shape(shape);
  check_batch(batch, shape);
  const size_t row = shape.token_elems();
  for (int seq = 0; seq < batch.num_seqs; ++seq) {
    const int32_t* table = batch.block_tables + static_cast<size_t>(seq) * batch.max_blocks_per_seq;
    for (int t = batch.query_start[seq]; t < batch.query_start[seq + 1]; ++t) {
      const size_t dst = cache_offset(table, batch.positions[t], 0, shape);
      std::memcpy(k_cache + dst, k + static_cast<size_t>(t) * row, row * sizeof(float));
      std::memcpy(v_cache + dst, v + static_cast<size_t>(t) * row, row * sizeof(float));
    }
  }
}

void paged_attention_ref(float* out, const float* q, const float* k_cache, const float* v_cache,
                         const AttentionBatch& batch, const PagedKvShape& shape, const AttentionParams& params) {
  check_shape(shape);
  CONVEYOR_CHECK(params.n_heads > 0 && params.n_heads % shape.n_kv_heads == 0, "attention: n_heads ",
                 params.n_heads, " is not a positive multiple of n_kv_heads ", shape.n_kv_heads);
  CONVEYOR_CHECK(params.scale > 0.f && std::isfinite(params.scale), "attention: scale must be > 0, got ",
                 params.scale);
  CONVEYOR_CHECK(params.sliding_window >= 0, "attention: sliding_window must be >= 0, got ", params.sliding_window);
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
#pragma omp for schedule(dynamic, 4)
    for (long long i = 0; i < work; ++i) {
      const int t = static_cast<int>(i / n_heads);
      const int h = static_cast<int>(i % n_heads);
      const int pos = batch.positions[t];
      const int lo = params.sliding_window > 0 ? std::max(0, pos - params.sliding_window + 1) : 0;
      const int32_t* table = batch.block_tables + static_cast<size_t>(seq_of[t]) * batch.max_blocks_per_seq;
      const size_t off = (static_cast<size_t>(t) * n_heads + h) * d;
      attend_one(out + off, q + off, k_cache, v_cache, table, h / group, lo, pos, shape, params.scale,
                 scores.data());
    }
  }
}

void attention_ref(float* out, const float* q, const float* k, const float* v, float* k_cache, float* v_cache,
                   const AttentionBatch& batch, const PagedKvShape& shape, const AttentionParams& params) {
  write_kv_cache_ref(k_cache, v_cache, k, v, batch, shape);
  paged_attention_ref(out, q, k_cache, v_cache, batch, shape, params);
}

}  // namespace conveyor
