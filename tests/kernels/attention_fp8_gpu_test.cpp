// The FP8 KV cache on the GPU against its CPU twin (kernels/cpu/attention.h): write_kv_cache_cuda stores
// exactly write_kv_cache_fp8_ref's codes (bf16, f16, f32 inputs rounded on the host; saturation, NaN,
// untouched slots), and paged_attention_cuda over e4m3 pools equals paged_attention_fp8_ref within the
// dtype's tolerance on every element: MHA, GQA, MQA, head_dim 16/32/64/128/256, block sizes 16/32/48,
// mixed decode and prefill batches (the tensor-core prefill kernel and the decode kernel), chunks after
// history (chunked prefill), split-K decodes, sliding windows and the device max-context path of graphs; the
// decode kernel in both FP8 layouts (8 or 16 codes per lane).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/fp8.h"
#include "kernels/cuda/attention.h"
#include "runtime/core/error.h"
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

// Random codes, NaN codes replaced (a history slot holding NaN would make every output NaN).
std::vector<uint8_t> random_codes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> c(n);
  for (uint8_t& x : c) {
    x = static_cast<uint8_t>(rng() & 0xff);
    if ((x & 0x7f) == 0x7f) x ^= 1;
  }
  return c;
}

// One test batch: the shared paging layout, random code pools, inputs rounded to the dtype.
struct HostBatch : testing::PagedLayout {
  std::vector<uint8_t> k_cache, v_cache;
  std::vector<float> q, k, v;
};

HostBatch make_batch(const Case& c, DType dt, uint64_t seed) {
  HostBatch h;
  std::mt19937_64 rng(seed);
  static_cast<testing::PagedLayout&>(h) = testing::lay_out(c.seqs, c.block_size, c.n_kv_heads, c.head_dim, rng);
  const size_t tokens = h.positions.size();
  h.k_cache = random_codes(h.shape.layer_elems(), seed + 1);
  h.v_cache = random_codes(h.shape.layer_elems(), seed + 2);
  h.k = random_floats(tokens * h.shape.token_elems(), seed + 3);
  h.v = random_floats(tokens * h.shape.token_elems(), seed + 4);
  h.q = random_floats(tokens * c.n_heads * c.head_dim, seed + 5, -3.f, 3.f);
  for (auto* x : {&h.k, &h.v, &h.q}) round_all(*x, dt);
  return h;
}

// Scales that put decoded history in about [-1, 1] (codes reach 448) and new K/V codes up to ~300.
const KvScales kScales{1.f / 300, 1.f / 448};

void run_case(const Case& c, DType dt) {
  SCOPED_TRACE(c.name + " " + dtype_name(dt));
  HostBatch h = make_batch(c, dt, 2000 + c.head_dim + 7 * c.n_heads + c.window);
  const int tokens = static_cast<int>(h.positions.size());
  CudaBuffer k_cache = CudaBuffer::from(h.k_cache), v_cache = CudaBuffer::from(h.v_cache);
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
  const KvCacheFormat fmt{true, kScales};

  write_kv_cache_cuda(k_cache.data(), v_cache.data(), k.data(), v.data(), b, h.shape, dt, nullptr, fmt);

  const AttentionBatch hb = h.batch();
  write_kv_cache_fp8_ref(h.k_cache.data(), h.v_cache.data(), h.k.data(), h.v.data(), hb, h.shape, kScales);
  EXPECT_TRUE(k_cache.to_host<uint8_t>() == h.k_cache) << "K codes";
  EXPECT_TRUE(v_cache.to_host<uint8_t>() == h.v_cache) << "V codes";
  std::vector<float> want(static_cast<size_t>(tokens) * c.n_heads * c.head_dim);
  paged_attention_fp8_ref(want.data(), h.q.data(), h.k_cache.data(), h.v_cache.data(), hb, h.shape, p, kScales);
  const float tol = dt == DType::kBF16 ? 1e-2f : 2e-3f;
  for (auto layout : {Fp8DecodeLayout::kMma, Fp8DecodeLayout::kNarrow, Fp8DecodeLayout::kWide}) {
    SCOPED_TRACE(layout == Fp8DecodeLayout::kMma      ? "mma FP8 decode"
                 : layout == Fp8DecodeLayout::kNarrow ? "narrow FP8 decode"
                                                      : "wide FP8 decode");
    set_fp8_decode_layout(layout);
    testing::for_each_prefill_kernel([&] {
      std::vector<float> token_major;
      for (bool heads_first : {false, true}) {  // the decode grid in either order: the same CTAs, the same bits
        set_decode_heads_first(heads_first);
        CONVEYOR_CUDA_CHECK(cudaMemset(out.data(), 0xff, out.bytes()));  // NaN: every element must be written
        paged_attention_cuda(out.data(), q.data(), k_cache.data(), v_cache.data(), b, h.shape, p, ws.data(), dt,
                             nullptr, fmt);
        const std::vector<float> got = testing::download(out, dt);
        if (!heads_first) EXPECT_EQ(compare_all(got, want, tol, tol), "") << "attention output";
        else EXPECT_EQ(compare_all(got, token_major, 0.f, 0.f), "") << "heads-first decode grid";
        token_major = got;
      }
      set_decode_heads_first(false);
    });
  }
  set_fp8_decode_layout(Fp8DecodeLayout::kMma);
}

class PagedAttentionFp8Gpu : public ::testing::TestWithParam<DType> {};

TEST_P(PagedAttentionFp8Gpu, GqaMixedBatch) {
  std::vector<std::pair<int, int>> seqs = kMixed;
  seqs.push_back({4900, 100});
  run_case({"gqa 32/8 d128 bs16", 32, 8, 128, 16, 0, seqs}, GetParam());
  run_case({"gqa 32/8 d128 bs32 window 64", 32, 8, 128, 32, 64, seqs}, GetParam());
}
TEST_P(PagedAttentionFp8Gpu, MhaAndMqaHeadDim64) {
  run_case({"mha 8/8 d64 bs16", 8, 8, 64, 16, 0, kMixed}, GetParam());
  run_case({"mqa 8/1 d64 bs32 window 64", 8, 1, 64, 32, 64, kMixed}, GetParam());
  run_case({"smollm2 9/3 d64 bs16", 9, 3, 64, 16, 0, kMixed}, GetParam());
}
TEST_P(PagedAttentionFp8Gpu, DecodesSplitK) {
  run_case({"mqa 16/1 d128 bs16 decodes", 16, 1, 128, 16, 0, kDecodes}, GetParam());
  run_case({"gqa 32/8 d128 bs32 decodes", 32, 8, 128, 32, 0, kDecodes}, GetParam());
  run_case({"gqa 32/8 d128 bs16 decodes window 64", 32, 8, 128, 16, 64, kDecodes}, GetParam());
}
TEST_P(PagedAttentionFp8Gpu, DeviceMaxContextBound) {
  run_case({"gqa 32/8 d128 bs16 decodes bound x8", 32, 8, 128, 16, 0, kDecodes, 8}, GetParam());
  run_case({"gqa 8/2 d64 bs16 mixed bound x8", 8, 2, 64, 16, 0, kMixed, 8}, GetParam());
}
TEST_P(PagedAttentionFp8Gpu, LongSingleSplitDecodes) {
  std::vector<std::pair<int, int>> seqs;
  for (int i = 0; i < 256; ++i) seqs.push_back({(i * 733) % 1500, 1});
  run_case({"mqa 16/1 d128 bs48 256 decodes window 700", 16, 1, 128, 48, 700, seqs}, GetParam());
}
TEST_P(PagedAttentionFp8Gpu, GenericHeadDims) {
  // No tensor-core prefill for 256, 16 and 32: the decode kernel serves the chunks too.
  run_case({"gqa 8/2 d256 bs16", 8, 2, 256, 16, 0, kMixed}, GetParam());
  run_case({"gqa 8/2 d16 bs16", 8, 2, 16, 16, 0, kMixed}, GetParam());
  run_case({"mqa 3/1 d32 bs16 window 48", 3, 1, 32, 16, 48, kMixed}, GetParam());
  run_case({"gqa 12/4 d64 bs16", 12, 4, 64, 16, 0, kMixed}, GetParam());
}
TEST_P(PagedAttentionFp8Gpu, ChunkedPrefillAfterHistory) {
  // A 300-token chunk (several 64-row tiles, one ragged) after 700 cached positions, next to decodes.
  run_case({"gqa 32/8 d128 bs16 chunk 300", 32, 8, 128, 16, 0, {{700, 300}, {5, 1}, {2000, 1}}}, GetParam());
  run_case({"gqa 8/2 d64 bs32 chunk 130 window 100", 8, 2, 64, 32, 100, {{64, 130}, {0, 65}}}, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Dtypes, PagedAttentionFp8Gpu, ::testing::Values(DType::kBF16, DType::kF16),
                         [](const ::testing::TestParamInfo<DType>& i) { return std::string(dtype_name(i.param)); });

// The write alone, from every input dtype: the codes are the twin's bit for bit, including saturation
// (|x / scale| > 448), NaN (0x7f) and signed zero; slots no token names keep their bytes.
TEST(Fp8KvWriteGpu, CodesEqualTheTwin) {
  for (DType dt : {DType::kBF16, DType::kF16, DType::kF32}) {
    SCOPED_TRACE(dtype_name(dt));
    HostBatch h = make_batch({"write", 4, 2, 64, 16, 0, {{0, 9}, {40, 1}, {17, 33}}}, dt, 77);
    h.k = random_floats(h.k.size(), 78, -4.f, 4.f);  // |k| / (1/300) up to 1200: many saturate
    h.k[0] = std::numeric_limits<float>::quiet_NaN();
    h.k[1] = -0.f;
    h.v[2] = std::numeric_limits<float>::infinity();
    round_all(h.k, dt);
    round_all(h.v, dt);
    CudaBuffer kc = CudaBuffer::from(h.k_cache), vc = CudaBuffer::from(h.v_cache);
    CudaBuffer k = testing::upload(h.k, dt), v = testing::upload(h.v, dt);
    CudaBuffer qs = CudaBuffer::from(h.query_start), pos = CudaBuffer::from(h.positions);
    CudaBuffer tables = CudaBuffer::from(h.tables);
    AttentionBatchCuda b;
    b.num_seqs = static_cast<int>(h.query_start.size()) - 1;
    b.num_tokens = static_cast<int>(h.positions.size());
    b.query_start = qs.as<int32_t>();
    b.positions = pos.as<int32_t>();
    b.block_tables = tables.as<int32_t>();
    b.max_blocks_per_seq = h.max_blocks;
    write_kv_cache_cuda(kc.data(), vc.data(), k.data(), v.data(), b, h.shape, dt, nullptr, KvCacheFormat{true, kScales});
    write_kv_cache_fp8_ref(h.k_cache.data(), h.v_cache.data(), h.k.data(), h.v.data(), h.batch(), h.shape, kScales);
    const std::vector<uint8_t> kg = kc.to_host<uint8_t>(), vg = vc.to_host<uint8_t>();
    for (size_t i = 0; i < kg.size(); ++i) {
      ASSERT_EQ(int(kg[i]), int(h.k_cache[i])) << "K code " << i;
      ASSERT_EQ(int(vg[i]), int(h.v_cache[i])) << "V code " << i;
    }
  }
}

TEST(Fp8KvGpuArgs, RejectsBadScales) {
  AttentionBatchCuda b;
  b.num_tokens = 1;
  b.num_seqs = 1;
  const PagedKvShape shape{4, 16, 2, 64};
  const AttentionParams p{4, 0.1f, 0};
  for (const KvScales& s : {KvScales{0.f, 1.f}, KvScales{1.f, -1.f}, KvScales{std::nanf(""), 1.f}}) {
    EXPECT_THROW(paged_attention_cuda(nullptr, nullptr, nullptr, nullptr, b, shape, p, nullptr, DType::kBF16, nullptr,
                                      KvCacheFormat{true, s}),
                 Error);
    EXPECT_THROW(write_kv_cache_cuda(nullptr, nullptr, nullptr, nullptr, b, shape, DType::kBF16, nullptr,
                                     KvCacheFormat{true, s}),
                 Error);
  }
}

}  // namespace
}  // namespace conveyor
