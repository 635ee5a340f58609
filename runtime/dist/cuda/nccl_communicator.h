// Communicator over NCCL on device memory. Every call is enqueued on the given CUDA stream and returns
// without waiting; the unique id is created by group rank 0 and broadcast over the group's MPI
// communicator, one NCCL communicator per group.
#pragma once

#include <mpi.h>
#include <nccl.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/dist/communicator.h"

namespace conveyor {

class NcclRequest;

class NcclCommunicator : public Communicator {
 public:
  // Collective over `group` (an MPI communicator of the same ranks, not owned).
  NcclCommunicator(MPI_Comm group, std::string name);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* kind() const override { return "nccl"; }
  bool capturable() const override { return true; }
  std::string name() const override { return name_; }
  ncclComm_t handle() const { return comm_; }

  // "", or the asynchronous error NCCL has recorded (polled by the watchdog).
  std::string async_error() const override;
  // Aborts outstanding operations so no rank stays blocked in NCCL (used on failure).
  void abort() override;

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
  void group_start() override;
  void group_end() override;

 private:
  std::unique_ptr<CommRequest> make_request(Stream stream);
  ncclComm_t comm_ = nullptr;
  std::string name_;
  int rank_ = 0;
  int size_ = 1;
  void* barrier_buf_ = nullptr;  // one float on the device for barrier()
  int group_depth_ = 0;
  // Requests made inside a group get their completion event once the group is enqueued.
  std::vector<std::pair<NcclRequest*, Stream>> pending_;
};

}  // namespace conveyor
