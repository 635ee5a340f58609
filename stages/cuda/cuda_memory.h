// Device memory for the CUDA backend: a caching pool of activation blocks and a pinned staging ring for
// per-step metadata. The pool hands out the smallest cached block that fits (best fit over size
// classes) and takes it back when the last Tensor referring to one dies; since every op of a CudaOps runs on ONE stream, a block freed on the host
// may be reused at once (later work on the stream is ordered after the earlier readers). A pool
// made with a slab (sized by the memory plan) serves its steps without any cudaMalloc.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/core/cuda_buffer.h"

namespace conveyor {

class DevicePool {
 public:
  // slab_bytes > 0: one block of that size is allocated now and blocks are carved from it before any
  // cudaMalloc, so the steps the memory plan sized the slab for allocate nothing.
  explicit DevicePool(size_t slab_bytes = 0);
  ~DevicePool();
  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;

  // A block of at least `bytes` (rounded up to a size class), owned by the returned pointer: its
  // deleter gives the block back to `pool`, which it keeps alive.
  static std::shared_ptr<void> take(const std::shared_ptr<DevicePool>& pool, size_t bytes);
  size_t cached_bytes() const;
  size_t live_bytes() const;
  size_t slab_bytes() const { return slab_.bytes(); }

  // The size class of a request: <= 25% rounding waste, so steps of nearby sizes share blocks.
  static size_t size_class(size_t bytes);

 private:
  void give_back(void* p, size_t bytes);
  void* carve(size_t bytes);  // from the slab's unused tail, or null; under mu_

  mutable std::mutex mu_;  // Tensors may die on another thread than the one running the ops
  std::map<size_t, std::vector<void*>> free_;
  size_t cached_ = 0;
  size_t live_ = 0;
  CudaBuffer slab_;
  size_t slab_used_ = 0;
};

// Pinned host buffers for host-to-device copies enqueued on a stream, used round-robin: a slot is
// rewritten only after the copy that last read it has finished (its event), so the host may run a
// step or two ahead of the device without corrupting metadata still in flight.
class PinnedRing {
 public:
  explicit PinnedRing(int slots = 2);
  ~PinnedRing();
  PinnedRing(const PinnedRing&) = delete;
  PinnedRing& operator=(const PinnedRing&) = delete;

  // Makes every slot at least `bytes` long now (start-up), so acquire() allocates only for larger steps.
  void reserve(size_t bytes);
  // The next slot, at least `bytes` long, safe to write now.
  void* acquire(size_t bytes);
  // Copies the acquired slot's first `bytes` to dst on stream and marks the slot busy until then.
  void copy_to_device(void* dst, size_t bytes, cudaStream_t stream);

 private:
  struct Slot {
    void* host = nullptr;
    size_t bytes = 0;
    cudaEvent_t done = nullptr;
  };
  static void grow(Slot& s, size_t bytes);
  std::vector<Slot> slots_;
  int next_ = 0;
  int current_ = -1;
};

// A device buffer that only grows (step metadata, rope tables). Growing waits for `stream`, so
// pending kernels never read freed memory.
class GrowingBuffer {
 public:
  void* reserve(size_t bytes, cudaStream_t stream);
  // The bytes reserve(bytes) allocates when it grows (headroom for the next, slightly larger step).
  static size_t allocation_for(size_t bytes) { return bytes + bytes / 2 + 256; }
  void* data() const { return buffer_.data(); }

 private:
  CudaBuffer buffer_;
};

// cudaMalloc through CudaBuffer (its error names the size, the purpose and the free memory); the
// caller owns the block and frees it with cudaFree.
void* device_malloc(size_t bytes, const char* what);

}  // namespace conveyor
