// DevicePool, PinnedRing, GrowingBuffer (see cuda_memory.h).
#include "stages/cuda/cuda_memory.h"

#include <utility>

#include "runtime/core/cuda_buffer.h"
#include "runtime/core/cuda_check.h"

namespace conveyor {

void* device_malloc(size_t bytes, const char* what) { return CudaBuffer(bytes == 0 ? 1 : bytes, what).release(); }

DevicePool::DevicePool(size_t slab_bytes) {
  if (slab_bytes > 0) slab_ = CudaBuffer(slab_bytes, "the activation pool");
}

DevicePool::~DevicePool() {
  const char* lo = static_cast<const char*>(slab_.data());
  for (auto& [bytes, ptrs] : free_)
    for (void* p : ptrs) {
      const char* c = static_cast<const char*>(p);
      if (!lo || c < lo || c >= lo + slab_.bytes()) cudaFree(p);  // slab blocks go with the slab
    }
}

void* DevicePool::carve(size_t bytes) {
  constexpr size_t kAlign = 256;
  const size_t start = (slab_used_ + kAlign - 1) / kAlign * kAlign;
  if (!slab_.data() || start + bytes > slab_.bytes()) return nullptr;
  slab_used_ = start + bytes;
  return static_cast<char*>(slab_.data()) + start;
}

size_t DevicePool::size_class(size_t bytes) {
  if (bytes <= 256) return 256;
  size_t top = 256;
  while (top * 2 <= bytes) top *= 2;
  const size_t step = top / 4;
  return (bytes + step - 1) / step * step;
}

std::shared_ptr<void> DevicePool::take(const std::shared_ptr<DevicePool>& pool, size_t bytes) {
  size_t cls = size_class(bytes);
  void* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(pool->mu_);
    // Best fit: the smallest cached block that holds the request. A decode step after a prefill then
    // runs in the prefill's blocks instead of allocating its own smaller classes.
    for (auto it = pool->free_.lower_bound(cls); it != pool->free_.end(); ++it) {
      if (it->second.empty()) continue;
      p = it->second.back();
      it->second.pop_back();
      cls = it->first;
      pool->cached_ -= cls;
      break;
    }
    if (!p) p = pool->carve(cls);
    pool->live_ += cls;
  }
  if (!p) {
    try {
      p = device_malloc(cls, "an activation tensor");
    } catch (...) {
      std::lock_guard<std::mutex> lock(pool->mu_);
      pool->live_ -= cls;
      throw;
    }
  }
  std::shared_ptr<DevicePool> keep = pool;
  return std::shared_ptr<void>(p, [keep, cls](void* q) { keep->give_back(q, cls); });
}

void DevicePool::give_back(void* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  free_[bytes].push_back(p);
  cached_ += bytes;
  live_ -= bytes;
}

size_t DevicePool::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cached_;
}

size_t DevicePool::live_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_;
}

PinnedRing::PinnedRing(int slots) : slots_(static_cast<size_t>(slots)) {
  for (Slot& s : slots_) CONVEYOR_CUDA_CHECK(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
}

PinnedRing::~PinnedRing() {
  for (Slot& s : slots_) {
    if (s.done) {
      cudaEventSynchronize(s.done);
      cudaEventDestroy(s.done);
    }
    if (s.host) cudaFreeHost(s.host);
  }
}

void PinnedRing::grow(Slot& s, size_t want) {
  if (s.host) CONVEYOR_CUDA_CHECK(cudaFreeHost(s.host));
  s.host = nullptr;
  s.bytes = 0;
  CONVEYOR_CUDA_CHECK(cudaMallocHost(&s.host, want));
  s.bytes = want;
}

void PinnedRing::reserve(size_t bytes) {
  for (Slot& s : slots_) {
    CONVEYOR_CUDA_CHECK(cudaEventSynchronize(s.done));
    if (s.bytes < bytes) grow(s, bytes);
  }
}

void* PinnedRing::acquire(size_t bytes) {
  Slot& s = slots_[static_cast<size_t>(next_)];
  current_ = next_;
  next_ = (next_ + 1) % static_cast<int>(slots_.size());
  CONVEYOR_CUDA_CHECK(cudaEventSynchronize(s.done));  // the copy that last read this slot is done
  if (s.bytes < bytes) grow(s, bytes < 4096 ? 4096 : bytes + bytes / 2);
  return s.host;
}

void PinnedRing::copy_to_device(void* dst, size_t bytes, cudaStream_t stream) {
  CONVEYOR_CHECK(current_ >= 0, "internal: PinnedRing::copy_to_device without acquire");
  Slot& s = slots_[static_cast<size_t>(current_)];
  CONVEYOR_CHECK(bytes <= s.bytes, "internal: PinnedRing copy of ", bytes, " bytes from a slot of ", s.bytes);
  if (bytes > 0) CONVEYOR_CUDA_CHECK(cudaMemcpyAsync(dst, s.host, bytes, cudaMemcpyHostToDevice, stream));
  CONVEYOR_CUDA_CHECK(cudaEventRecord(s.done, stream));
  current_ = -1;
}

void* GrowingBuffer::reserve(size_t bytes, cudaStream_t stream) {
  if (bytes <= buffer_.bytes() && buffer_.data()) return buffer_.data();
  if (buffer_.data()) {
    CONVEYOR_CUDA_CHECK(cudaStreamSynchronize(stream));  // kernels may still read the old buffer
    buffer_.reset();
  }
  buffer_ = CudaBuffer(allocation_for(bytes), "step metadata");
  return buffer_.data();
}

}  // namespace conveyor
