// The communication side of a CUDA stage: a second stream for sends and receives between stages
// (ordered against the ops' stream by events, so micro-batch m travels while m+1 computes), and the
// device timestamps of the trace (timing events, read after the run, relative to a base event that
// is recorded right after the ranks' common barrier).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

namespace conveyor {

class CudaTransferStreams {
 public:
  CudaTransferStreams();
  ~CudaTransferStreams();
  CudaTransferStreams(const CudaTransferStreams&) = delete;
  CudaTransferStreams& operator=(const CudaTransferStreams&) = delete;

  cudaStream_t comm() const { return comm_; }
  // Later work on `waiter` waits for what is enqueued on `signaller` now.
  void order_after(cudaStream_t waiter, cudaStream_t signaller);
  // A timing event on `s`; its seconds since the base once it has run (waits for it).
  int64_t mark(cudaStream_t s);
  double seconds(int64_t id);
  // Forgets the marks and records a new base on `s`.
  void restart(cudaStream_t s);

 private:
  cudaStream_t comm_ = nullptr;
  cudaEvent_t order_ = nullptr;  // one suffices: a wait takes the event's state when it is enqueued
  std::vector<cudaEvent_t> marks_;  // [0] is the base
};

}  // namespace conveyor
