// Communicator over an MPI communicator on host memory: the CPU backend's transport, and the
// fallback that needs no GPU. bf16/f16 reductions accumulate in fp32 through user-defined MPI ops.
#pragma once

#include <mpi.h>

#include "runtime/dist/communicator.h"

namespace conveyor {

class MpiCommunicator : public Communicator {
 public:
  // Takes ownership of `comm` (freed in the destructor) unless it is MPI_COMM_WORLD/SELF.
  MpiCommunicator(MPI_Comm comm, std::string name);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* kind() const override { return "mpi"; }
  std::string name() const override { return name_; }
  MPI_Comm comm() const { return comm_; }
  // Point-to-point messages of at most `bytes` (0: as large as MPI takes). Below a transport's eager
  // limit a send completes without its receiver, so a sender busy computing never holds up the
  // receiver (without a single-copy mechanism MPI's rendezvous needs the sender inside an MPI call).
  // Both sides of a message must use the same limit.
  void set_message_limit(size_t bytes) { message_bytes_ = bytes; }

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
  void check_peer(int peer, const char* op) const;
  MPI_Comm comm_;
  std::string name_;
  int rank_ = 0;
  int size_ = 1;
  size_t message_bytes_ = 0;
};

// MPI datatype for a conveyor dtype (bf16/f16 are committed 2-byte contiguous types).
MPI_Datatype mpi_datatype(DType dtype);

}  // namespace conveyor
