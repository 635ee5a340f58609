// Tests rope_cuda against rope_ref (bf16, f16, f32; default and llama3-scaled inv_freq; head_dim 64
// and 128; odd token counts and large positions) and rope_qkv_write_kv_cuda (from one fused q|k|v
// projection) against rope_ref followed by write_kv_cache_ref on a shuffled paged pool, and into an
// FP8 pool against write_kv_cache_fp8_ref's codes. Every element is checked.
#include "kernels/cuda/rope.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/rope.h"
#include "tests/kernels/attention_gpu_support.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using testing::compare_all;
using testing::random_floats;
using testing::round_all;

// One ulp of the storage type (the GPU rounds its fp32 result once) plus fp32 sincos differences.
float tolerance(DType dt) { return dt == DType::kBF16 ? 8e-3f : dt == DType::kF16 ? 1e-3f : 2e-5f; }

RopeTable table_for(bool llama3, int head_dim) {
  if (llama3) return RopeTable(head_dim, 500000.0, RopeFreqScaling{RopeFreqType::kLlama3, 8.f, 1.f, 4.f, 8192}, 131072);
  return RopeTable(head_dim, 10000.0, RopeFreqScaling{}, 4096);
}

struct RopeCase {
  DType dt;
  bool llama3;
  int head_dim;
};

class RopeGpu : public ::testing::TestWithParam<RopeCase> {};

TEST_P(RopeGpu, MatchesReference) {
  const RopeCase c = GetParam();
  const int tokens = 37, n_heads = 12, n_kv_heads = 3;
  const RopeTable table = table_for(c.llama3, c.head_dim);
  std::vector<int32_t> positions(tokens);
  std::mt19937 rng(7);
  for (int t = 0; t < tokens; ++t) positions[t] = t < 5 ? t : static_cast<int>(rng() % 100000);
  std::vector<float> q = random_floats(size_t(tokens) * n_heads * c.head_dim, 11, -2.f, 2.f);
  std::vector<float> k = random_floats(size_t(tokens) * n_kv_heads * c.head_dim, 12, -2.f, 2.f);
  round_all(q, c.dt);
  round_all(k, c.dt);
  CudaBuffer qd = testing::upload(q, c.dt), kd = testing::upload(k, c.dt);
  CudaBuffer pd = CudaBuffer::from(positions), fd = CudaBuffer::from(table.static_inv_freq());
  rope_cuda(qd.data(), kd.data(), pd.as<int32_t>(), fd.as<float>(), tokens, n_heads, n_kv_heads, c.head_dim, c.dt,
            nullptr);
  rope_ref(q.data(), k.data(), positions.data(), tokens, n_heads, n_kv_heads, table);
  const float tol = tolerance(c.dt);
  EXPECT_EQ(compare_all(testing::download(qd, c.dt), q, tol, tol), "") << "q";
  EXPECT_EQ(compare_all(testing::download(kd, c.dt), k, tol, tol), "") << "k";
}

// Three sequences (a decode at 1000, a `chunk`-token chunk after 40 cached, a 1-token prompt) on a shuffled
// pool, random q, k, v and caches rounded to the dtype, and the reference result of rope + cache write.
struct FusedCase {
  // 9 + 3 heads: a CTA's group of 4 straddles the last q head and the first KV heads (as SmolLM2's do).
  int n_heads = 9, n_kv_heads = 3, block_size = 16, max_blocks = 0, tokens = 0;
  PagedKvShape shape;
  std::vector<int32_t> query_start{0}, positions, tables;
  std::vector<float> q, k, v, k_cache, v_cache;          // inputs
  std::vector<float> q_ref, k_cache_ref, v_cache_ref;    // expected

  FusedCase(const RopeCase& c, const RopeTable& table, int chunk = 23) {
    const std::vector<std::pair<int, int>> seqs = {{1000, 1}, {40, chunk}, {0, 1}};
    max_blocks = 1001 / block_size + 2;
    shape = PagedKvShape{3 * max_blocks, block_size, n_kv_heads, c.head_dim};
    std::vector<int32_t> ids(shape.num_blocks);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), std::mt19937(3));
    for (size_t s = 0; s < seqs.size(); ++s) {
      for (int i = 0; i < max_blocks; ++i) tables.push_back(ids[s * max_blocks + i]);
      for (int p = seqs[s].first; p < seqs[s].first + seqs[s].second; ++p) positions.push_back(p);
      query_start.push_back(query_start.back() + seqs[s].second);
    }
    tokens = query_start.back();
    q = random_floats(size_t(tokens) * n_heads * c.head_dim, 21);
    k = random_floats(size_t(tokens) * shape.token_elems(), 22);
    v = random_floats(size_t(tokens) * shape.token_elems(), 23);
    k_cache = random_floats(shape.layer_elems(), 24);
    v_cache = random_floats(shape.layer_elems(), 25);
    for (auto* x : {&q, &k, &v, &k_cache, &v_cache}) round_all(*x, c.dt);
    q_ref = q;
    std::vector<float> k_rot = k;
    k_cache_ref = k_cache;
    v_cache_ref = v_cache;
    rope_ref(q_ref.data(), k_rot.data(), positions.data(), tokens, n_heads, n_kv_heads, table);
    AttentionBatch hb;
    hb.num_seqs = static_cast<int>(seqs.size());
    hb.query_start = query_start.data();
    hb.positions = positions.data();
    hb.block_tables = tables.data();
    hb.max_blocks_per_seq = max_blocks;
    write_kv_cache_ref(k_cache_ref.data(), v_cache_ref.data(), k_rot.data(), v.data(), hb, shape);
  }

  AttentionBatchCuda batch(const CudaBuffer& qsd, const CudaBuffer& pd, const CudaBuffer& td) const {
    AttentionBatchCuda b;
    b.num_seqs = static_cast<int>(query_start.size()) - 1;
    b.num_tokens = tokens;
    b.query_start = qsd.as<int32_t>();
    b.positions = pd.as<int32_t>();
    b.block_tables = td.as<int32_t>();
    b.max_blocks_per_seq = max_blocks;
    b.max_query_len = 23;
    b.max_context_len = 1001;
    return b;
  }

  // q | k | v per token, as the fused projection writes it.
  std::vector<float> qkv(int head_dim) const {
    const size_t qc = size_t(n_heads) * head_dim, kc = size_t(shape.token_elems());
    std::vector<float> out;
    for (int t = 0; t < tokens; ++t) {
      out.insert(out.end(), q.begin() + t * qc, q.begin() + (t + 1) * qc);
      out.insert(out.end(), k.begin() + t * kc, k.begin() + (t + 1) * kc);
      out.insert(out.end(), v.begin() + t * kc, v.begin() + (t + 1) * kc);
    }
    return out;
  }
};

// The fused kernel against rope_ref + write_kv_cache_ref on FusedCase(c, table, chunk).
void check_fused(const RopeCase& c, int chunk) {
  const RopeTable table = table_for(c.llama3, c.head_dim);
  const FusedCase f(c, table, chunk);
  const std::vector<float> qkv = f.qkv(c.head_dim);
  CudaBuffer qkvd = testing::upload(qkv, c.dt), qd = testing::upload(f.v_cache, c.dt);  // q_out: any garbage
  CudaBuffer kc = testing::upload(f.k_cache, c.dt), vc = testing::upload(f.v_cache, c.dt);
  CudaBuffer qsd = CudaBuffer::from(f.query_start), pd = CudaBuffer::from(f.positions);
  CudaBuffer td = CudaBuffer::from(f.tables), fd = CudaBuffer::from(table.static_inv_freq());
  rope_qkv_write_kv_cuda(qd.data(), qkvd.data(), kc.data(), vc.data(), fd.as<float>(), f.batch(qsd, pd, td), f.shape,
                         f.n_heads, c.dt, nullptr);
  const float tol = tolerance(c.dt);
  std::vector<float> q_out = testing::download(qd, c.dt);
  q_out.resize(f.q_ref.size());  // the buffer was the cache's size; q_out is its first tokens x q columns
  EXPECT_EQ(compare_all(q_out, f.q_ref, tol, tol), "") << "q";
  EXPECT_EQ(compare_all(testing::download(kc, c.dt), f.k_cache_ref, tol, tol), "") << "K cache";
  EXPECT_EQ(compare_all(testing::download(vc, c.dt), f.v_cache_ref, 0.f, 0.f), "") << "V cache";
  EXPECT_EQ(compare_all(testing::download(qkvd, c.dt), qkv, 0.f, 0.f), "") << "qkv input must stay untouched";
}

TEST_P(RopeGpu, FusedFromQkvProjection) { check_fused(GetParam(), 23); }

// 725 tokens of 12 heads: more than 2,112 CTAs in groups of 4, so each CTA takes 6 heads (a group straddling
// the last q heads and the KV heads).
TEST_P(RopeGpu, FusedLongChunkInWiderGroups) { check_fused(GetParam(), 700); }

// Codes the fused kernel (fp32 rotation from dt inputs, sincosf) and the twin (rope_ref, then the e4m3
// code of k / scale) give may sit on either side of a rounding boundary: at most one code apart, same
// sign, and rarely; V is not rotated, so its codes are equal.
bool adjacent_codes(uint8_t a, uint8_t b) {
  if (a == b || ((a | b) & 0x7f) == 0) return true;  // equal, or +0 / -0
  return ((a ^ b) & 0x80) == 0 && std::abs(int(a & 0x7f) - int(b & 0x7f)) == 1;
}

std::vector<uint8_t> random_codes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> c(n);
  for (uint8_t& x : c) x = static_cast<uint8_t>(rng() & 0xff);
  return c;
}

TEST_P(RopeGpu, FusedWritesFp8Codes) {
  const RopeCase c = GetParam();
  const RopeTable table = table_for(c.llama3, c.head_dim);
  const FusedCase f(c, table);
  const KvScales scales{1.f / 200, 1.f / 600};  // |k| <= 1.4 after rope: codes up to ~280; |v| / scale saturates
  std::vector<uint8_t> k_want = random_codes(f.shape.layer_elems(), 31), v_want = random_codes(f.shape.layer_elems(), 32);
  CudaBuffer kc = CudaBuffer::from(k_want), vc = CudaBuffer::from(v_want);
  std::vector<float> k_rot = f.k, q_rot = f.q;
  rope_ref(q_rot.data(), k_rot.data(), f.positions.data(), f.tokens, f.n_heads, f.n_kv_heads, table);
  AttentionBatch hb{static_cast<int>(f.query_start.size()) - 1, f.query_start.data(), f.positions.data(),
                    f.tables.data(), f.max_blocks};
  write_kv_cache_fp8_ref(k_want.data(), v_want.data(), k_rot.data(), f.v.data(), hb, f.shape, scales);
  CudaBuffer qkvd = testing::upload(f.qkv(c.head_dim), c.dt), qd = testing::upload(f.q, c.dt);
  CudaBuffer qsd = CudaBuffer::from(f.query_start), pd = CudaBuffer::from(f.positions);
  CudaBuffer td = CudaBuffer::from(f.tables), fd = CudaBuffer::from(table.static_inv_freq());
  rope_qkv_write_kv_cuda(qd.data(), qkvd.data(), kc.data(), vc.data(), fd.as<float>(), f.batch(qsd, pd, td), f.shape,
                         f.n_heads, c.dt, nullptr, KvCacheFormat{true, scales});
  const std::vector<uint8_t> k_got = kc.to_host<uint8_t>(), v_got = vc.to_host<uint8_t>();
  size_t k_off = 0;
  for (size_t i = 0; i < k_got.size(); ++i) {
    ASSERT_EQ(v_got[i], v_want[i]) << "V code " << i;
    ASSERT_TRUE(adjacent_codes(k_got[i], k_want[i])) << "K code " << i << ": " << int(k_got[i]) << " vs "
                                                     << int(k_want[i]);
    k_off += k_got[i] != k_want[i];
  }
  EXPECT_LE(k_off, k_got.size() / 100) << "K codes one step off the twin's";
  const float tol = tolerance(c.dt);
  EXPECT_EQ(compare_all(testing::download(qd, c.dt), q_rot, tol, tol), "") << "q";
}

INSTANTIATE_TEST_SUITE_P(
    Cases, RopeGpu,
    ::testing::Values(RopeCase{DType::kBF16, false, 128}, RopeCase{DType::kBF16, true, 128},
                      RopeCase{DType::kF16, false, 64}, RopeCase{DType::kF16, true, 128},
                      RopeCase{DType::kF32, false, 64}, RopeCase{DType::kF32, true, 128}),
    [](const ::testing::TestParamInfo<RopeCase>& i) {
      return std::string(dtype_name(i.param.dt)) + (i.param.llama3 ? "_llama3_" : "_default_") +
             std::to_string(i.param.head_dim);
    });

TEST(RopeGpuArgs, RejectsOddHeadDim) {
  EXPECT_THROW(rope_cuda(nullptr, nullptr, nullptr, nullptr, 1, 4, 2, 63, DType::kBF16, nullptr), Error);
  EXPECT_THROW(rope_cuda(nullptr, nullptr, nullptr, nullptr, 1, 4, 2, 64, DType::kI32, nullptr), Error);
}

}  // namespace
}  // namespace conveyor
