// Block pool and per-sequence block tables (see block_allocator.h).
#include "runtime/engine/block_allocator.h"

#include <algorithm>
#include <utility>

#include "runtime/core/error.h"

namespace conveyor {

BlockAllocator::BlockAllocator(int num_blocks) : in_use_(static_cast<size_t>(std::max(num_blocks, 0)), 0) {
  CONVEYOR_CHECK(num_blocks > 0, "KV cache: the block pool needs at least one block, got ", num_blocks,
                 "; give the cache more memory or use a smaller block size");
  free_.reserve(num_blocks);
  for (int b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

bool BlockAllocator::allocate(int count, std::vector<int32_t>& out) {
  CONVEYOR_CHECK(count >= 0, "KV cache: asked for ", count, " blocks");
  if (count > free_count()) return false;
  for (int i = 0; i < count; ++i) {
    const int32_t b = free_.back();
    free_.pop_back();
    in_use_[b] = 1;
    out.push_back(b);
  }
  return true;
}

void BlockAllocator::free(int32_t block) {
  CONVEYOR_CHECK(block >= 0 && block < num_blocks(), "KV cache: block ", block, " is outside the pool of ",
                 num_blocks(), " blocks");
  CONVEYOR_CHECK(in_use_[block], "KV cache: block ", block, " is freed twice (it is not in use)");
  in_use_[block] = 0;
  free_.push_back(block);
}

BlockTable::BlockTable(BlockAllocator& allocator, int block_size) : allocator_(&allocator), block_size_(block_size) {
  CONVEYOR_CHECK(block_size > 0, "KV cache: block_size must be > 0, got ", block_size);
}

BlockTable::~BlockTable() {
  if (allocator_) free_all();
}

BlockTable::BlockTable(BlockTable&& other) noexcept
    : allocator_(std::exchange(other.allocator_, nullptr)),
      block_size_(other.block_size_),
      num_tokens_(std::exchange(other.num_tokens_, 0)),
      blocks_(std::move(other.blocks_)) {
  other.blocks_.clear();
}

BlockTable& BlockTable::operator=(BlockTable&& other) noexcept {
  if (this != &other) {
    if (allocator_) free_all();
    allocator_ = std::exchange(other.allocator_, nullptr);
    block_size_ = other.block_size_;
    num_tokens_ = std::exchange(other.num_tokens_, 0);
    blocks_ = std::move(other.blocks_);
    other.blocks_.clear();
  }
  return *this;
}

int BlockTable::blocks_needed(int n) const {
  CONVEYOR_CHECK(n >= 0, "KV cache: cannot append ", n, " tokens");
  const long long total = static_cast<long long>(num_tokens_) + n;
  const long long blocks = (total + block_size_ - 1) / block_size_;
  return static_cast<int>(blocks - static_cast<long long>(blocks_.size()));
}

AppendResult BlockTable::append(int n) {
  CONVEYOR_CHECK(allocator_ != nullptr, "KV cache: append on a moved-from block table");
  const int need = blocks_needed(n);
  if (need > 0 && !allocator_->allocate(need, blocks_)) return AppendResult::kNoFreeBlock;
  num_tokens_ += n;
  return AppendResult::kOk;
}

void BlockTable::free_all() {
  // Blocks go back in reverse so that a table freed and re-appended gets the same ids again.
  for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it) allocator_->free(*it);
  blocks_.clear();
  num_tokens_ = 0;
}

void BlockTable::copy_to(int32_t* row, int max_blocks) const {
  const int n = static_cast<int>(blocks_.size());
  CONVEYOR_CHECK(n <= max_blocks, "KV cache: a sequence of ", num_tokens_, " tokens holds ", n,
                 " blocks but the step's block table has room for ", max_blocks);
  std::copy(blocks_.begin(), blocks_.end(), row);
  std::fill(row + n, row + max_blocks, -1);
}

}  // namespace conveyor
