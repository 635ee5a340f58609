// Tests KvCache: layer addressing by global index, disjoint K/V pools per layer in the attention
// kernels' layout (written through write_kv_cache_ref with tables from BlockTable), and sizing.
#include "stages/kv_cache.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "kernels/cpu/attention.h"
#include "runtime/core/error.h"
#include "runtime/engine/block_allocator.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using testing::random_floats;

TEST(KvCache, LayersAreDisjointAndAddressedGlobally) {
  const PagedKvShape shape{6, 4, 2, 8};
  KvCache cache(10, 3, shape);  // a stage holding layers 10, 11, 12
  EXPECT_EQ(cache.bytes(), 2u * 3 * shape.layer_elems() * sizeof(float));
  std::vector<const float*> starts;
  for (int l = 10; l < 13; ++l) {
    starts.push_back(cache.k(l));
    starts.push_back(cache.v(l));
  }
  for (size_t i = 1; i < starts.size(); ++i) EXPECT_EQ(starts[i] - starts[i - 1], long(shape.layer_elems()));
  EXPECT_THROW(cache.k(9), Error);
  try {
    cache.v(13);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds layers [10, 13)"), std::string::npos) << e.what();
  }
}

TEST(KvCache, WritesLandWhereTheBlockTableSays) {
  const PagedKvShape shape{8, 4, 2, 8};
  KvCache cache(0, 2, shape);
  BlockAllocator alloc(shape.num_blocks);
  BlockTable a(alloc, shape.block_size), b(alloc, shape.block_size);
  ASSERT_EQ(a.append(3), AppendResult::kOk);  // block 0
  ASSERT_EQ(b.append(9), AppendResult::kOk);  // blocks 1, 2, 3
  ASSERT_EQ(a.append(6), AppendResult::kOk);  // blocks 4, 5: a = {0, 4, 5}

  // Write all 9 + 9 positions of both sequences into layer 1.
  std::vector<int32_t> qs = {0, 9, 18}, pos(18), tables(2 * 3);
  std::iota(pos.begin(), pos.begin() + 9, 0);
  std::iota(pos.begin() + 9, pos.end(), 0);
  a.copy_to(tables.data(), 3);
  b.copy_to(tables.data() + 3, 3);
  EXPECT_EQ(tables, (std::vector<int32_t>{0, 4, 5, 1, 2, 3}));
  const size_t row = shape.token_elems();
  auto k = random_floats(18 * row, 1), v = random_floats(18 * row, 2);
  AttentionBatch batch{2, qs.data(), pos.data(), tables.data(), 3};
  write_kv_cache_ref(cache.k(1), cache.v(1), k.data(), v.data(), batch, shape);

  for (int t = 0; t < 18; ++t) {
    const int32_t* table = tables.data() + (t < 9 ? 0 : 3);
    const size_t at = (size_t(table[pos[t] / 4]) * 4 + pos[t] % 4) * row;
    for (size_t i = 0; i < row; ++i) {
      ASSERT_EQ(cache.k(1)[at + i], k[t * row + i]) << "token " << t;
      ASSERT_EQ(cache.v(1)[at + i], v[t * row + i]) << "token " << t;
    }
  }
  // Layer 0 was not touched.
  for (size_t i = 0; i < shape.layer_elems(); ++i) ASSERT_EQ(cache.k(0)[i], 0.f);
}

TEST(KvCache, Sizing) {
  // Llama-3-8B per TP rank of 8: 32 layers, 1 KV head of 128, block 16, bf16.
  EXPECT_EQ(KvCache::bytes_per_block(32, 16, 1, 128, 2), 2u * 32 * 16 * 128 * 2);
  EXPECT_EQ(KvCache::blocks_that_fit(1u << 30, 32, 16, 1, 128, 2), (1 << 30) / (2 * 32 * 16 * 128 * 2));
  EXPECT_EQ(KvCache::blocks_that_fit(100, 2, 16, 2, 64, 4), 0);
  EXPECT_EQ(kv_bytes_per_token(32, 8, 128, 2), 2u * 32 * 8 * 128 * 2);
  EXPECT_EQ(KvCache::bytes_needed(32, PagedKvShape{10, 16, 8, 128}, DType::kBF16),
            10 * KvCache::bytes_per_block(32, 16, 8, 128, 2));
  EXPECT_THROW(KvCache(0, 1, PagedKvShape{0, 16, 1, 64}), Error);
  EXPECT_THROW(KvCache(-1, 1, PagedKvShape{1, 16, 1, 64}), Error);
}

// FP8 KV: one byte per element, so a budget holds twice the blocks of bf16 (four times fp32's).
TEST(KvCache, Fp8HalvesTheBytesOfBf16) {
  EXPECT_EQ(KvCache::bytes_per_block(32, 16, 8, 128, 1) * 2, KvCache::bytes_per_block(32, 16, 8, 128, 2));
  const size_t budget = size_t(10) << 30;
  EXPECT_EQ(KvCache::blocks_that_fit(budget, 32, 16, 8, 128, 1), 2 * KvCache::blocks_that_fit(budget, 32, 16, 8, 128, 2));
  const PagedKvShape shape{6, 4, 2, 8};
  KvCache fp8(3, 2, shape, DType::kU8);
  EXPECT_TRUE(fp8.fp8());
  EXPECT_EQ(fp8.bytes(), 2u * 2 * shape.layer_elems());
  EXPECT_EQ(static_cast<char*>(fp8.v_data(3)) - static_cast<char*>(fp8.k_data(3)), long(shape.layer_elems()));
  EXPECT_THROW(fp8.k(3), Error);  // no fp32 view of codes
  EXPECT_THROW(KvCache(0, 1, shape, DType::kBF16), Error);  // the host holds f32 or FP8
}

TEST(KvCache, Fp8ScalesPerLayer) {
  KvCache cache(4, 2, PagedKvShape{2, 4, 1, 8}, DType::kU8);
  EXPECT_EQ(cache.scales(4).k, 1.f);  // 1.0 until set, as vLLM
  EXPECT_EQ(cache.scales(5).v, 1.f);
  cache.set_scales(5, KvScales{0.25f, 0.5f});
  EXPECT_EQ(cache.scales(5).k, 0.25f);
  EXPECT_EQ(cache.scales(5).v, 0.5f);
  EXPECT_EQ(cache.scales(4).k, 1.f);
  EXPECT_THROW(cache.set_scales(5, KvScales{0.f, 1.f}), Error);
  EXPECT_THROW(cache.set_scales(5, KvScales{1.f, -2.f}), Error);
  EXPECT_THROW(cache.set_scales(6, KvScales{}), Error);
  EXPECT_THROW(cache.scales(3), Error);
}

TEST(KvCache, StartUpLineNamesWhereTheScalesCameFrom) {
  const PagedKvShape shape{2, 4, 1, 8};
  KvCache fp8(0, 30, shape, DType::kU8), f32(0, 30, shape);
  EXPECT_EQ(describe_kv_cache(f32, 0), "");
  EXPECT_NE(describe_kv_cache(fp8, 30).find("from the checkpoint's k_scale/v_scale (30 of 30 layers)"),
            std::string::npos);
  EXPECT_NE(describe_kv_cache(fp8, 0).find("scales 1.0 (the checkpoint has no k_scale/v_scale"), std::string::npos);
  EXPECT_NE(describe_kv_cache(f32, 30).find("unused"), std::string::npos);
  EXPECT_EQ(kv_dtype_label(DType::kU8), "fp8_e4m3");
  EXPECT_EQ(kv_dtype_label(DType::kBF16), "bf16");
}

}  // namespace
}  // namespace conveyor
