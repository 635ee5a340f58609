// Paged-KV block bookkeeping on the leader: a fixed pool of block ids (BlockAllocator) and, per
// sequence, the ordered list of blocks that holds its positions (BlockTable). Running out of blocks
// is a normal event the scheduler answers by preempting, so it is a result value, not an exception;
// misuse (double free, foreign block) is a bug and throws. No prefix sharing: a block has one owner.
#pragma once

#include <cstdint>
#include <vector>

namespace conveyor {

class BlockAllocator {
 public:
  explicit BlockAllocator(int num_blocks);
  BlockAllocator(const BlockAllocator&) = delete;
  BlockAllocator& operator=(const BlockAllocator&) = delete;

  int num_blocks() const { return static_cast<int>(in_use_.size()); }
  int free_count() const { return static_cast<int>(free_.size()); }
  int used_count() const { return num_blocks() - free_count(); }

  // Takes `count` blocks, all or none: returns false and takes nothing when fewer are free.
  // Lowest ids go first on a fresh pool, which keeps tests and traces readable.
  [[nodiscard]] bool allocate(int count, std::vector<int32_t>& out);
  void free(int32_t block);  // throws on an id outside the pool or one that is not in use

 private:
  std::vector<int32_t> free_;   // a stack; its back is handed out next
  std::vector<uint8_t> in_use_;
};

enum class AppendResult { kOk, kNoFreeBlock };

// The blocks of one sequence. Holds its allocator; returns its blocks when freed or destroyed.
// Move-only, so a block can never be returned twice.
class BlockTable {
 public:
  BlockTable(BlockAllocator& allocator, int block_size);
  ~BlockTable();
  BlockTable(BlockTable&& other) noexcept;
  BlockTable& operator=(BlockTable&& other) noexcept;
  BlockTable(const BlockTable&) = delete;
  BlockTable& operator=(const BlockTable&) = delete;

  int block_size() const { return block_size_; }
  int num_tokens() const { return num_tokens_; }  // positions [0, num_tokens) have a slot
  const std::vector<int32_t>& blocks() const { return blocks_; }

  // Blocks that append(n) would have to take from the allocator.
  int blocks_needed(int n) const;
  // Reserves slots for n more positions, taking blocks as needed; all or nothing.
  [[nodiscard]] AppendResult append(int n);
  // Returns every block and empties the table (preemption or a finished sequence).
  void free_all();

  // Writes the block ids into a row of a [num_seqs, max_blocks] table, padding with -1; throws when
  // the sequence has more than max_blocks blocks.
  void copy_to(int32_t* row, int max_blocks) const;

 private:
  BlockAllocator* allocator_;
  int block_size_;
  int num_tokens_ = 0;
  std::vector<int32_t> blocks_;
};

}  // namespace conveyor
