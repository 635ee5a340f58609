// PinnedPool (see pinned_pool.h). Blocks are powers of two from 1 MiB, so a stream of messages of
// slightly different sizes (prefill chunks) reuses the same few blocks.
#include "runtime/dist/cuda/pinned_pool.h"

#include <algorithm>

#include "runtime/core/cuda_check.h"

namespace conveyor {

namespace {
size_t block_size_for(size_t bytes) {
  size_t b = size_t{1} << 20;
  while (b < bytes) b <<= 1;
  return b;
}
}  // namespace

PinnedPool::~PinnedPool() {
  for (auto& b : owned_) {
    if (b->last_use) cudaEventDestroy(b->last_use);
    if (b->data) cudaFreeHost(b->data);
  }
}

PinnedLease PinnedPool::acquire(size_t bytes) {
  PinnedBlock* block = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if ((*it)->capacity >= bytes && (best == free_.end() || (*it)->capacity < (*best)->capacity)) best = it;
    if (best != free_.end()) {
      block = *best;
      free_.erase(best);
    }
  }
  if (!block) {
    auto fresh = std::make_unique<PinnedBlock>();
    fresh->capacity = block_size_for(bytes);
    CONVEYOR_CUDA_CHECK(cudaHostAlloc(&fresh->data, fresh->capacity, cudaHostAllocPortable));
    CONVEYOR_CUDA_CHECK(cudaEventCreateWithFlags(&fresh->last_use, cudaEventDisableTiming));
    block = fresh.get();
    std::lock_guard<std::mutex> lock(mu_);
    owned_.push_back(std::move(fresh));
  }
  // A copy enqueued by the previous holder may still be reading or writing the block.
  CONVEYOR_CUDA_CHECK(cudaEventSynchronize(block->last_use));
  std::shared_ptr<PinnedPool> self = shared_from_this();
  return PinnedLease(block, [self](PinnedBlock* b) { self->give_back(b); });
}

void PinnedPool::give_back(PinnedBlock* b) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(b);
}

size_t PinnedPool::blocks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return owned_.size();
}

}  // namespace conveyor
