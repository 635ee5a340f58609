// Communicator for GPU ranks that NCCL cannot join (two ranks of one group on one device): device data
// is copied to pinned host memory on the caller's stream, moved by an MpiCommunicator (whose bf16/f16
// reductions accumulate in fp32), and copied back on the same stream. Device-side ordering is the
// stream's, as with NCCL; the host waits for the device-to-host copy of what it sends, so none of it
// can be captured into a CUDA graph (capturable() is false).
#pragma once

#include <mpi.h>

#include <memory>
#include <string>

#include "runtime/dist/communicator.h"
#include "runtime/dist/cuda/pinned_pool.h"
#include "runtime/dist/mpi_communicator.h"

namespace conveyor {

class StagedCommunicator : public Communicator {
 public:
  // `group` is duplicated (not owned), so this transport's messages never match the caller's.
  StagedCommunicator(MPI_Comm group, std::string name);

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  const char* kind() const override { return "staged"; }
  std::string name() const override { return host_->name(); }
  size_t pinned_blocks() const { return pool_->blocks(); }

  using Communicator::all_gather;
  using Communicator::all_reduce;
  using Communicator::broadcast;
  using Communicator::recv;
  using Communicator::send;
  void send(const void* buf, size_t count, DType dtype, int peer, Stream stream) override;
  void recv(void* buf, size_t count, DType dtype, int peer, Stream stream) override;
  std::unique_ptr<CommRequest> isend(const void* buf, size_t count, DType dtype, int peer, Stream stream) override;
  std::unique_ptr<CommRequest> irecv(void* buf, size_t count, DType dtype, int peer, Stream stream) override;
  void all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op, Stream stream) override;
  void all_gather(const void* send, void* recv, size_t count, DType dtype, Stream stream) override;
  void broadcast(void* buf, size_t count, DType dtype, int root, Stream stream) override;
  void barrier(Stream stream) override;

 private:
  // Device -> a fresh pinned block; returns once the bytes are on the host.
  PinnedLease to_host(const void* device_src, size_t bytes, Stream stream);
  std::unique_ptr<MpiCommunicator> host_;
  std::shared_ptr<PinnedPool> pool_;
};

// Pinned block -> device, enqueued on `stream`; the block is lent again only after the copy is done.
void stage_to_device(const PinnedLease& block, void* device_dst, size_t bytes, Stream stream);

}  // namespace conveyor
