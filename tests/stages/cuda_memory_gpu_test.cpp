// The activation pool's best fit (stages/cuda/cuda_memory.h): a request is served by the smallest
// cached block that holds it, so the small tensors of a decode step reuse the blocks a prefill left
// behind instead of allocating; the accounting (live, cached) follows the block, not the request.
#include "stages/cuda/cuda_memory.h"

#include <gtest/gtest.h>

#include <memory>

namespace conveyor {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

TEST(DevicePool, SmallerRequestReusesACachedLargerBlock) {
  auto pool = std::make_shared<DevicePool>();
  void* big = nullptr;
  {
    std::shared_ptr<void> b = DevicePool::take(pool, 8 * kMiB);
    big = b.get();
    ASSERT_NE(big, nullptr);
  }
  EXPECT_EQ(pool->cached_bytes(), DevicePool::size_class(8 * kMiB));
  std::shared_ptr<void> small = DevicePool::take(pool, 3000);
  EXPECT_EQ(small.get(), big) << "a 3000-byte request allocated although an 8 MiB block was cached";
  EXPECT_EQ(pool->cached_bytes(), 0u);
  EXPECT_EQ(pool->live_bytes(), DevicePool::size_class(8 * kMiB));
  small.reset();
  EXPECT_EQ(pool->live_bytes(), 0u);
  EXPECT_EQ(pool->cached_bytes(), DevicePool::size_class(8 * kMiB));
}

TEST(DevicePool, TakesTheSmallestBlockThatFits) {
  auto pool = std::make_shared<DevicePool>();
  void* mid = nullptr;
  {
    std::shared_ptr<void> a = DevicePool::take(pool, 16 * kMiB);
    std::shared_ptr<void> b = DevicePool::take(pool, 2 * kMiB);
    std::shared_ptr<void> c = DevicePool::take(pool, 64 * 1024);
    mid = b.get();
  }
  std::shared_ptr<void> got = DevicePool::take(pool, kMiB + 1);
  EXPECT_EQ(got.get(), mid) << "1 MiB + 1 should take the 2 MiB block, not the 16 MiB one";
  std::shared_ptr<void> exact = DevicePool::take(pool, 16 * kMiB);
  EXPECT_NE(exact.get(), nullptr);
  EXPECT_EQ(pool->cached_bytes(), DevicePool::size_class(64 * 1024)) << "only the 64 KiB block is left";
}

TEST(DevicePool, AllocatesWhenNoCachedBlockIsLargeEnough) {
  auto pool = std::make_shared<DevicePool>();
  void* small_block = nullptr;
  {
    std::shared_ptr<void> s = DevicePool::take(pool, 4096);
    small_block = s.get();
  }
  std::shared_ptr<void> big = DevicePool::take(pool, 4 * kMiB);
  EXPECT_NE(big.get(), small_block);
  EXPECT_EQ(pool->cached_bytes(), DevicePool::size_class(4096)) << "the small block stays cached";
  EXPECT_EQ(pool->live_bytes(), DevicePool::size_class(4 * kMiB));
}

}  // namespace
}  // namespace conveyor
