// Page-locked host blocks for staging device data through the host: cudaMemcpyAsync into pinned
// memory is a DMA that needs no bounce buffer, and MPI can read it like any host memory. A block is
// lent out as a Lease and comes back to the pool when the last copy of the lease is dropped; it is
// lent again only after the last device copy that read it has finished (its event).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace conveyor {

struct PinnedBlock {
  void* data = nullptr;
  size_t capacity = 0;
  cudaEvent_t last_use = nullptr;  // recorded after an enqueued copy out of (or into) the block
};

using PinnedLease = std::shared_ptr<PinnedBlock>;

class PinnedPool : public std::enable_shared_from_this<PinnedPool> {
 public:
  ~PinnedPool();
  // A block of at least `bytes`, free for the host to read and write now.
  PinnedLease acquire(size_t bytes);
  size_t blocks() const;

 private:
  void give_back(PinnedBlock* b);
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<PinnedBlock>> owned_;
  std::vector<PinnedBlock*> free_;
};

}  // namespace conveyor
