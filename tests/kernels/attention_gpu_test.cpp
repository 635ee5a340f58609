// Tests write_kv_cache_cuda and paged_attention_cuda against write_kv_cache_ref / paged_attention_ref
// (fp32, on the same dtype-rounded inputs) for bf16 and f16: MHA, GQA, MQA, head_dim 64/128/256,
// block sizes 16, 32 and 48, batches mixing decodes and prefill chunks (query lengths 1, 7, 100; contexts
// 1 to 5000; whole prompts of 700 and 1000) on shuffled block tables, sliding windows 0, 48, 64, 300 and
// 700, the device max-context path (grid sized for a bound, splits from the exact value). Every element is
// checked, for each prefill kernel the GPU runs (mma.sync, and wgmma on sm_90).
#include "kernels/cuda/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/attention.h"
#include "tests/kernels/attention_gpu_support.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using testing::compare_all;
using testing::random_floats;
using testing::round_all;

using Case = testing::AttentionCase;
const auto& kMixed = testing::kMixedSeqs;
const auto& kDecodes = testing::kDecodeSeqs;

std::vector<std::pair<int, int>> with(std::vector<std::pair<int, int>> v, std::pair<int, int> extra) {
  v.push_back(extra);
  return v;
}

// One test batch: the shared paging layout and random inputs rounded to the dtype.
struct HostBatch : testing::PagedLayout {
  std::vector<float> k_cache, v_cache, q, k, v;
};

HostBatch make_batch(const Case& c, DType dt, uint64_t seed) {
  HostBatch h;
  std::mt19937_64 rng(seed);
  static_cast<testing::PagedLayout&>(h) = testing::lay_out(c.seqs, c.block_size, c.n_kv_heads, c.head_dim, rng);
  const size_t tokens = h.positions.size();
  // The whole pool is random: history slots hold "earlier" K/V, the rest is garbage nobody may read.
  h.k_cache = random_floats(h.shape.layer_elems(), seed + 1);
  h.v_cache = random_floats(h.shape.layer_elems(), seed + 2);
  h.k = random_floats(tokens * h.shape.token_elems(), seed + 3);
  h.v = random_floats(tokens * h.shape.token_elems(), seed + 4);
  h.q = random_floats(tokens * c.n_heads * c.head_dim, seed + 5, -3.f, 3.f);  // scores of order 1
  for (auto* v : {&h.k_cache, &h.v_cache, &h.k, &h.v, &h.q}) round_all(*v, dt);
  return h;
}

void run_case(const Case& c, DType dt) {
  SCOPED_TRACE(c.name + " " + dtype_name(dt));
  HostBatch h = make_batch(c, dt, 1000 + c.head_dim + 7 * c.n_heads + c.window);
  const int tokens = static_cast<int>(h.positions.size());
  CudaBuffer k_cache = testing::upload(h.k_cache, dt), v_cache = testing::upload(h.v_cache, dt);
  CudaBuffer k = testing::upload(h.k, dt), v = testing::upload(h.v, dt), q = testing::upload(h.q, dt);
  CudaBuffer out(static_cast<size_t>(tokens) * c.n_heads * c.head_dim * dtype_size(dt));
  CudaBuffer qs = CudaBuffer::from(h.query_start), pos = CudaBuffer::from(h.positions);
  CudaBuffer tables = CudaBuffer::from(h.tables);
  AttentionBatchCuda b;
  b.num_seqs = static_cast<int>(c.seqs.size());
  b.num_tokens = tokens;
  b.query_start = qs.as<int32_t>();
  b.positions = pos.as<int32_t>();
  b.block_tables = tables.as<int32_t>();
  b.max_blocks_per_seq = h.max_blocks;
  b.max_query_len = h.max_query_len;
  b.max_context_len = h.max_context_len * c.context_bound;
  CudaBuffer exact_ctx = CudaBuffer::from(std::vector<int32_t>{h.max_context_len});
  if (c.context_bound > 1) b.max_context_len_dev = exact_ctx.as<int32_t>();
  const AttentionParams p{c.n_heads, 1.f / std::sqrt(static_cast<float>(c.head_dim)), c.window};
  CudaBuffer ws(paged_attention_workspace_bytes(tokens, c.n_heads, c.head_dim, b.max_context_len));

  write_kv_cache_cuda(k_cache.data(), v_cache.data(), k.data(), v.data(), b, h.shape, dt, nullptr);

  const AttentionBatch hb = h.batch();
  write_kv_cache_ref(h.k_cache.data(), h.v_cache.data(), h.k.data(), h.v.data(), hb, h.shape);
  EXPECT_EQ(compare_all(testing::download(k_cache, dt), h.k_cache, 0.f, 0.f), "") << "K cache";
  EXPECT_EQ(compare_all(testing::download(v_cache, dt), h.v_cache, 0.f, 0.f), "") << "V cache";
  std::vector<float> want(static_cast<size_t>(tokens) * c.n_heads * c.head_dim);
  paged_attention_ref(want.data(), h.q.data(), h.k_cache.data(), h.v_cache.data(), hb, h.shape, p);
  const float tol = dt == DType::kBF16 ? 1e-2f : 2e-3f;
  testing::for_each_prefill_kernel([&] {
    std::vector<float> token_major;
    for (bool heads_first : {false, true}) {  // the decode grid in either order: the same CTAs, the same bits
      set_decode_heads_first(heads_first);
      CONVEYOR_CUDA_CHECK(cudaMemset(out.data(), 0xff, out.bytes()));  // NaN: every element must be written
      paged_attention_cuda(out.data(), q.data(), k_cache.data(), v_cache.data(), b, h.shape, p, ws.data(), dt, nullptr);
      const std::vector<float> got = testing::download(out, dt);
      if (!heads_first) EXPECT_EQ(compare_all(got, want, tol, tol), "") << "attention output";
      else EXPECT_EQ(compare_all(got, token_major, 0.f, 0.f), "") << "heads-first decode grid";
      token_major = got;
    }
    set_decode_heads_first(false);
  });
}

class PagedAttentionGpu : public ::testing::TestWithParam<DType> {};

TEST_P(PagedAttentionGpu, GqaMixedBatch) {
  run_case({"gqa 32/8 d128 bs16", 32, 8, 128, 16, 0, with(kMixed, {4900, 100})}, GetParam());
}
TEST_P(PagedAttentionGpu, GqaMixedBatchWindow) {
  run_case({"gqa 32/8 d128 bs32 window 64", 32, 8, 128, 32, 64, with(kMixed, {4900, 100})}, GetParam());
}
TEST_P(PagedAttentionGpu, MhaHeadDim64) { run_case({"mha 8/8 d64 bs16", 8, 8, 64, 16, 0, kMixed}, GetParam()); }
TEST_P(PagedAttentionGpu, MqaHeadDim64Window) {
  run_case({"mqa 8/1 d64 bs32 window 64", 8, 1, 64, 32, 64, kMixed}, GetParam());
}
TEST_P(PagedAttentionGpu, MqaWideGroupDecodes) {
  // 16 query heads on one KV head: two head chunks per KV head; decodes only, many splits.
  run_case({"mqa 16/1 d128 bs16 decodes", 16, 1, 128, 16, 0, kDecodes}, GetParam());
}
TEST_P(PagedAttentionGpu, GqaDecodesSplitK) {
  run_case({"gqa 32/8 d128 bs32 decodes", 32, 8, 128, 32, 0, kDecodes}, GetParam());
  run_case({"gqa 32/8 d128 bs16 decodes window 64", 32, 8, 128, 16, 64, kDecodes}, GetParam());
}
TEST_P(PagedAttentionGpu, DeviceMaxContextBound) {
  // Grid and workspace sized for 8x the context; the kernels split by the exact device value (graphs).
  run_case({"gqa 32/8 d128 bs16 decodes bound x8", 32, 8, 128, 16, 0, kDecodes, 8}, GetParam());
  run_case({"gqa 8/2 d64 bs16 mixed bound x8", 8, 2, 64, 16, 0, kMixed, 8}, GetParam());
}
TEST_P(PagedAttentionGpu, LongSingleSplitDecodes) {
  // 256 decode tokens x 16 heads fill the GPU without splitting: each CTA pipelines a whole context
  // (up to 1500 positions, ~50 steps) with block size 16 and 48; two head chunks per KV head (MQA).
  std::vector<std::pair<int, int>> seqs;
  for (int i = 0; i < 256; ++i) seqs.push_back({(i * 733) % 1500, 1});
  run_case({"mqa 16/1 d128 bs16 256 decodes", 16, 1, 128, 16, 0, seqs}, GetParam());
  run_case({"mqa 16/1 d128 bs48 256 decodes window 700", 16, 1, 128, 48, 700, seqs}, GetParam());
}
TEST_P(PagedAttentionGpu, OddGroupOfThree) {
  // 12 heads over 4 KV heads: a head tile of 4 with one masked head per CTA.
  run_case({"gqa 12/4 d64 bs16", 12, 4, 64, 16, 0, kMixed}, GetParam());
}
TEST_P(PagedAttentionGpu, HeadDim256GenericPath) {
  // No tensor-core prefill for 256: every token, chunk or decode, takes the decode kernel.
  run_case({"gqa 8/2 d256 bs16", 8, 2, 256, 16, 0, kMixed}, GetParam());
}
TEST_P(PagedAttentionGpu, SmallHeadDims) {
  // head_dim 16 and 32 (tiny models): the decode kernel serves prefill chunks too.
  run_case({"gqa 8/2 d16 bs16", 8, 2, 16, 16, 0, kMixed}, GetParam());
  run_case({"mqa 3/1 d32 bs16 window 48", 3, 1, 32, 16, 48, kMixed}, GetParam());
}
TEST_P(PagedAttentionGpu, LongPrefillChunkAfterHistory) {
  // A 300-token chunk (several 64-row tiles, one ragged) after 700 cached positions, next to decodes.
  run_case({"gqa 32/8 d128 bs16 chunk 300", 32, 8, 128, 16, 0, {{700, 300}, {5, 1}, {2000, 1}}}, GetParam());
}

TEST_P(PagedAttentionGpu, LongCausalPrefills) {
  // Whole prompts from position 0 (every 128-row tile, causal tiles skipped per warpgroup) and a ragged
  // chunk after history, at both head sizes; a sliding window narrower than the chunk.
  run_case({"gqa 16/4 d128 bs16 prefill 1000", 16, 4, 128, 16, 0, {{0, 1000}, {100, 257}, {40, 1}}}, GetParam());
  run_case({"mha 8/8 d64 bs32 prefill 700 window 300", 8, 8, 64, 32, 300, {{0, 700}, {50, 130}}}, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Dtypes, PagedAttentionGpu, ::testing::Values(DType::kBF16, DType::kF16),
                         [](const ::testing::TestParamInfo<DType>& i) { return std::string(dtype_name(i.param)); });

TEST(PagedAttentionGpuArgs, RejectsBadArguments) {
  AttentionBatchCuda b;
  b.num_tokens = 1;
  b.num_seqs = 1;
  const PagedKvShape shape{4, 16, 2, 96};
  const AttentionParams p{4, 0.1f, 0};
  EXPECT_THROW(paged_attention_cuda(nullptr, nullptr, nullptr, nullptr, b, shape, p, nullptr, DType::kBF16, nullptr),
               Error);  // head_dim 96
  const PagedKvShape ok_shape{4, 16, 2, 128};
  EXPECT_THROW(paged_attention_cuda(nullptr, nullptr, nullptr, nullptr, b, ok_shape, p, nullptr, DType::kF32, nullptr),
               Error);  // f32
  const AttentionParams bad_heads{3, 0.1f, 0};
  EXPECT_THROW(
      paged_attention_cuda(nullptr, nullptr, nullptr, nullptr, b, ok_shape, bad_heads, nullptr, DType::kBF16, nullptr),
      Error);  // 3 heads over 2 KV heads
}

TEST(PagedAttentionGpuArgs, WorkspaceIsMonotone) {
  EXPECT_EQ(paged_attention_workspace_bytes(64, 32, 128, 64), 0u);  // one split at most
  size_t prev = 0;
  for (int tokens : {1, 4, 64, 512, 4096}) {
    const size_t w = paged_attention_workspace_bytes(tokens, 32, 128, 4096);
    EXPECT_GE(w, prev);
    prev = w;
  }
  EXPECT_LE(paged_attention_workspace_bytes(1 << 20, 64, 256, 1 << 20), size_t(64) << 20);  // bounded
}

}  // namespace
}  // namespace conveyor
