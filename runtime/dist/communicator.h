// The transport interface of conveyor: point-to-point and collectives over typed buffers within one
// group (a TP group, a pipeline, a DP group). Peers and roots are group-local ranks. Two implementations:
// MpiCommunicator (host memory; the CPU backend's transport) and NcclCommunicator (device memory,
// ordered on a CUDA stream), and StagedCommunicator (device memory through pinned host buffers and MPI,
// for ranks sharing a GPU). Calls on one communicator from one thread are ordered; p2p messages
// between a pair arrive in the order sent.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "kernels/dtype.h"

namespace conveyor {

enum class ReduceOp { kSum, kMax, kMin };

// A cudaStream_t for NCCL; ignored by MPI. nullptr is the default stream.
using Stream = void*;

// A pending non-blocking send or receive.
class CommRequest {
 public:
  virtual ~CommRequest() = default;
  virtual void wait() = 0;  // blocks (MPI) or orders the stream after the transfer (NCCL)
  virtual bool done() = 0;  // non-blocking completion test
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;  // group-local
  virtual int size() const = 0;
  virtual const char* kind() const = 0;  // "mpi", "nccl" or "staged"
  virtual std::string name() const = 0;  // "tp group of stage 1" — used in errors

  virtual void send(const void* buf, size_t count, DType dtype, int peer, Stream stream) = 0;
  virtual void recv(void* buf, size_t count, DType dtype, int peer, Stream stream) = 0;
  virtual std::unique_ptr<CommRequest> isend(const void* buf, size_t count, DType dtype, int peer,
                                             Stream stream) = 0;
  virtual std::unique_ptr<CommRequest> irecv(void* buf, size_t count, DType dtype, int peer, Stream stream) = 0;
  // send and recv may alias (in place).
  virtual void all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                          Stream stream) = 0;
  // recv holds size() * count elements, rank r's contribution at offset r * count.
  virtual void all_gather(const void* send, void* recv, size_t count, DType dtype, Stream stream) = 0;
  virtual void broadcast(void* buf, size_t count, DType dtype, int root, Stream stream) = 0;
  virtual void barrier(Stream stream) = 0;

  // Brackets a batch of p2p calls that must progress together (e.g. a send and a receive with the same
  // peer, or a ring exchange). NCCL needs this to avoid deadlock; MPI's non-blocking calls do not.
  virtual void group_start() {}
  virtual void group_end() {}
  // Whether its device-side calls may be recorded into a CUDA graph: they only enqueue work on the
  // stream and never wait on the host (NCCL); a transport that stages through the host cannot be.
  virtual bool capturable() const { return false; }

  // Polled by the Watchdog from its own thread: "" while healthy, else what went wrong asynchronously
  // (NCCL records errors of enqueued work; MPI reports its errors from the call itself).
  virtual std::string async_error() const { return ""; }
  // Makes every pending and future operation return or fail, so that no rank stays blocked; used
  // only on the way to ending the job. May be called from another thread.
  virtual void abort() {}

  // Typed conveniences.
  template <typename T>
  void send(const T* buf, size_t n, int peer, Stream s = nullptr) { send(buf, n, dtype_of<T>::value, peer, s); }
  template <typename T>
  void recv(T* buf, size_t n, int peer, Stream s = nullptr) { recv(buf, n, dtype_of<T>::value, peer, s); }
  template <typename T>
  void all_reduce(T* buf, size_t n, ReduceOp op = ReduceOp::kSum, Stream s = nullptr) {
    all_reduce(buf, buf, n, dtype_of<T>::value, op, s);
  }
  template <typename T>
  void broadcast(T* buf, size_t n, int root, Stream s = nullptr) { broadcast(buf, n, dtype_of<T>::value, root, s); }
  template <typename T>
  void all_gather(const T* send, T* recv, size_t n, Stream s = nullptr) {
    all_gather(send, recv, n, dtype_of<T>::value, s);
  }
};

}  // namespace conveyor
