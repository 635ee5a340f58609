// Model identity computed while the weights load: every rank hashes its share of the checkpoint's
// 16 MiB chunks (chunk i of the flat list goes to rank i mod world) on background threads, and
// verifies the files it is given (file f to rank f mod world) against a published SHA-256 where one
// exists. finish() gathers the chunk digests on rank 0, which alone needs the file digests (for the
// batch manifest). A checksum mismatch is thrown by the rank that found it.
#pragma once

#include <mpi.h>

#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/model/mmap_file.h"
#include "runtime/model/weight_digest.h"

namespace conveyor {

class WeightHashing {
 public:
  // Starts hashing at once; `threads` background threads on this rank.
  WeightHashing(const std::string& model_path, int rank, int world, int threads);
  ~WeightHashing();  // joins (a destructor on an error path must not leave threads running)
  WeightHashing(const WeightHashing&) = delete;
  WeightHashing& operator=(const WeightHashing&) = delete;

  // Collective over `comm` (rank/world as given to the constructor): waits for this rank's work,
  // rethrows its checksum mismatch, gathers digests. Rank 0 gets every file with its digest; other
  // ranks get the files without digests.
  std::vector<WeightFileInfo> finish(MPI_Comm comm);

 private:
  void work(int thread, int threads);
  void join();

  std::vector<WeightFileInfo> files_;
  std::vector<std::unique_ptr<MappedFile>> maps_;
  std::vector<ChunkRef> mine_;             // this rank's chunks
  std::vector<ChunkDigest> mine_digests_;  // same order
  std::vector<size_t> verify_;             // files this rank checks against a published SHA-256
  std::vector<std::thread> pool_;
  std::mutex error_mu_;
  std::exception_ptr error_;
  int rank_ = 0, world_ = 1;
};

// Threads per rank for hashing: a quarter of the cores a rank gets, at least one.
int weight_hash_threads(int local_ranks);

}  // namespace conveyor
