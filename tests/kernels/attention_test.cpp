// Tests attention_ref over a paged KV cache against dense causal attention in double, for MHA, GQA
// and MQA, several head dims and block sizes, mixed prefill/decode batches on shuffled block ids,
// sliding windows, and chunked prefill giving bit-identical results to a single prefill.
#include "kernels/cpu/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "runtime/core/error.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using testing::compare_all;
using testing::random_floats;

struct Geometry {
  int n_heads, n_kv_heads, head_dim, block_size;
};

// One sequence's full history (dense, by position) and the new tokens of this step.
struct Seq {
  int history;  // positions [0, history) are already cached
  int fresh;    // new tokens at positions [history, history + fresh)
  std::vector<float> k, v;  // [history + fresh, n_kv_heads, head_dim]
  std::vector<int32_t> blocks;
};

// Dense causal attention in double for the new tokens of one sequence.
std::vector<float> naive(const Seq& s, const std::vector<float>& q, const Geometry& g, int window) {
  const int d = g.head_dim, group = g.n_heads / g.n_kv_heads;
  std::vector<float> out(size_t(s.fresh) * g.n_heads * d);
  for (int t = 0; t < s.fresh; ++t) {
    const int pos = s.history + t;
    const int lo = window > 0 ? std::max(0, pos - window + 1) : 0;
    for (int h = 0; h < g.n_heads; ++h) {
      const float* qr = q.data() + (size_t(t) * g.n_heads + h) * d;
      std::vector<double> w(pos - lo + 1);
      double m = -INFINITY, sum = 0;
      for (int p = lo; p <= pos; ++p) {
        const float* kr = s.k.data() + (size_t(p) * g.n_kv_heads + h / group) * d;
        double dot = 0;
        for (int i = 0; i < d; ++i) dot += double(qr[i]) * kr[i];
        w[p - lo] = dot / std::sqrt(double(d));
        m = std::max(m, w[p - lo]);
      }
      for (double& x : w) sum += (x = std::exp(x - m));
      for (int i = 0; i < d; ++i) {
        double acc = 0;
        for (int p = lo; p <= pos; ++p) acc += w[p - lo] * s.v[(size_t(p) * g.n_kv_heads + h / group) * d + i];
        out[(size_t(t) * g.n_heads + h) * d + i] = static_cast<float>(acc / sum);
      }
    }
  }
  return out;
}

// Packs rows [from, to) of every sequence into one batch: q/k/v rows, positions, block tables.
struct Packed {
  std::vector<int32_t> query_start{0}, positions, tables;
  std::vector<float> k, v;
  AttentionBatch batch;
};

Packed pack(const std::vector<Seq>& seqs, const Geometry& g, bool fresh_only, int max_blocks) {
  Packed p;
  const size_t row = size_t(g.n_kv_heads) * g.head_dim;
  for (const Seq& s : seqs) {
    const int from = fresh_only ? s.history : 0, to = fresh_only ? s.history + s.fresh : s.history;
    for (int pos = from; pos < to; ++pos) p.positions.push_back(pos);
    p.k.insert(p.k.end(), s.k.begin() + from * row, s.k.begin() + to * row);
    p.v.insert(p.v.end(), s.v.begin() + from * row, s.v.begin() + to * row);
    p.query_start.push_back(p.query_start.back() + (to - from));
    std::vector<int32_t> t = s.blocks;
    t.resize(max_blocks, -1);
    p.tables.insert(p.tables.end(), t.begin(), t.end());
  }
  p.batch = AttentionBatch{static_cast<int>(seqs.size()), p.query_start.data(), p.positions.data(),
                           p.tables.data(), max_blocks};
  return p;
}

// Builds sequences with the given (history, fresh) lengths on shuffled blocks of one pool, writes
// the history into the cache, runs one attention step and compares every output element.
void run_case(const Geometry& g, const std::vector<std::pair<int, int>>& lens, int window, uint64_t seed) {
  std::mt19937 rng(seed);
  PagedKvShape shape{0, g.block_size, g.n_kv_heads, g.head_dim};
  int max_blocks = 0;
  for (auto [h, f] : lens) {
    const int need = (h + f + g.block_size - 1) / g.block_size;
    shape.num_blocks += need;
    max_blocks = std::max(max_blocks, need);
  }
  shape.num_blocks += 3;  // spare blocks nobody owns
  std::vector<int32_t> ids(shape.num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);

  std::vector<Seq> seqs;
  size_t next = 0, total_fresh = 0;
  const size_t row = size_t(g.n_kv_heads) * g.head_dim;
  for (auto [h, f] : lens) {
    Seq s{h, f, random_floats((h + f) * row, rng()), random_floats((h + f) * row, rng(), -2.f, 2.f), {}};
    for (int b = 0; b < (h + f + g.block_size - 1) / g.block_size; ++b) s.blocks.push_back(ids[next++]);
    seqs.push_back(std::move(s));
    total_fresh += f;
  }
  // Garbage in the whole pool, so a read of an unwritten slot shows.
  auto k_cache = random_floats(shape.layer_elems(), rng(), 50.f, 60.f);
  auto v_cache = random_floats(shape.layer_elems(), rng(), 50.f, 60.f);
  Packed hist = pack(seqs, g, false, max_blocks);
  write_kv_cache_ref(k_cache.data(), v_cache.data(), hist.k.data(), hist.v.data(), hist.batch, shape);

  Packed step = pack(seqs, g, true, max_blocks);
  auto q = random_floats(total_fresh * g.n_heads * g.head_dim, rng(), -2.f, 2.f);
  std::vector<float> out(q.size(), -1.f);
  AttentionParams params{g.n_heads, 1.f / std::sqrt(float(g.head_dim)), window};
  attention_ref(out.data(), q.data(), step.k.data(), step.v.data(), k_cache.data(), v_cache.data(), step.batch,
                shape, params);

  size_t row_q = size_t(g.n_heads) * g.head_dim, off = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    std::vector<float> qs(q.begin() + off * row_q, q.begin() + (off + seqs[i].fresh) * row_q);
    std::vector<float> got(out.begin() + off * row_q, out.begin() + (off + seqs[i].fresh) * row_q);
    EXPECT_EQ(compare_all(got, naive(seqs[i], qs, g, window), 2e-6f, 2e-5f), "")
        << "sequence " << i << " (history " << seqs[i].history << ", new " << seqs[i].fresh << "), heads "
        << g.n_heads << "/" << g.n_kv_heads << ", head_dim " << g.head_dim << ", block " << g.block_size;
    off += seqs[i].fresh;
  }
}

// A mixed step: a fresh prefill, decodes at block boundaries and inside blocks, a prefill chunk
// after cached history, a first token, and an empty sequence.
const std::vector<std::pair<int, int>> kMixed = {{0, 37}, {50, 1}, {16, 1}, {15, 1}, {20, 16}, {0, 1}, {9, 0}};

TEST(AttentionRef, MultiHead) { run_case({4, 4, 64, 16}, kMixed, 0, 1); }
TEST(AttentionRef, GroupedQuery) { run_case({8, 2, 128, 16}, kMixed, 0, 2); }
TEST(AttentionRef, MultiQuery) { run_case({6, 1, 80, 16}, kMixed, 0, 3); }
TEST(AttentionRef, OddHeadDimAndBlockSizes) {
  run_case({3, 3, 12, 1}, kMixed, 0, 4);
  run_case({2, 1, 256, 5}, kMixed, 0, 5);
  run_case({9, 3, 64, 32}, {{100, 1}, {0, 100}, {64, 40}}, 0, 6);
}
TEST(AttentionRef, SlidingWindow) {
  run_case({4, 2, 32, 16}, kMixed, 8, 7);
  run_case({4, 1, 16, 4}, kMixed, 1, 8);
  run_case({4, 4, 16, 16}, {{0, 30}, {40, 2}}, 1000, 9);  // wider than the context: no effect
}

// Prefill in chunks (16, 16, 8) gives the same bits as one prefill of 40 tokens: each query's
// result depends only on the cache contents, never on how the step was batched.
TEST(AttentionRef, ChunkedPrefillIsBitIdentical) {
  const Geometry g{4, 2, 32, 16};
  const int n = 40;
  const size_t row = size_t(g.n_kv_heads) * g.head_dim, row_q = size_t(g.n_heads) * g.head_dim;
  PagedKvShape shape{4, g.block_size, g.n_kv_heads, g.head_dim};
  auto q = random_floats(n * row_q, 1), k = random_floats(n * row, 2), v = random_floats(n * row, 3);
  std::vector<int32_t> table = {2, 0, 3};
  auto run = [&](const std::vector<int>& chunks) {
    std::vector<float> kc(shape.layer_elems(), 0.f), vc(shape.layer_elems(), 0.f), out(n * row_q);
    int start = 0;
    for (int c : chunks) {
      std::vector<int32_t> qs = {0, c}, pos(c);
      std::iota(pos.begin(), pos.end(), start);
      AttentionBatch b{1, qs.data(), pos.data(), table.data(), 3};
      attention_ref(out.data() + start * row_q, q.data() + start * row_q, k.data() + start * row,
                    v.data() + start * row, kc.data(), vc.data(), b, shape, {g.n_heads, 0.125f, 0});
      start += c;
    }
    return out;
  };
  const auto whole = run({40});
  EXPECT_EQ(compare_all(run({16, 16, 8}), whole, 0.f, 0.f), "");
  std::vector<int> ones(n, 1);
  EXPECT_EQ(compare_all(run(ones), whole, 0.f, 0.f), "");
}

TEST(AttentionRef, RejectsBadTablesAndShapes) {
  PagedKvShape shape{4, 16, 2, 8};
  std::vector<float> kc(shape.layer_elems()), vc(shape.layer_elems());
  auto q = random_floats(4 * 8, 1), k = random_floats(2 * 8, 2), v = random_floats(2 * 8, 3);
  std::vector<float> out(q.size());
  std::vector<int32_t> qs = {0, 1}, pos = {16}, table = {0, 1};
  AttentionBatch b{1, qs.data(), pos.data(), table.data(), 1};  // position 16 needs a second block
  AttentionParams p{4, 0.3f, 0};
  EXPECT_THROW(attention_ref(out.data(), q.data(), k.data(), v.data(), kc.data(), vc.data(), b, shape, p), Error);
  b.max_blocks_per_seq = 2;
  table[1] = 4;  // outside the pool
  try {
    attention_ref(out.data(), q.data(), k.data(), v.data(), kc.data(), vc.data(), b, shape, p);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("block table entry 1 is 4"), std::string::npos) << e.what();
  }
  table[1] = 3;
  p.n_heads = 3;  // not a multiple of 2 KV heads
  EXPECT_THROW(paged_attention_ref(out.data(), q.data(), kc.data(), vc.data(), b, shape, p), Error);
}

}  // namespace
}  // namespace conveyor
