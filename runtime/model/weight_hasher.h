// Hashing of a checkpoint while it loads: one rank's share of the 16 MiB chunks of every weight file
// (entry i of the flat chunk list goes to rank i mod world) on background threads, plus the check of
// the files it is given (file f to rank f mod world) against a published SHA-256 where one exists.
// The ranks' digests are then brought together (an MPI gather in launch/, or directly on one
// process) and assemble() turns them into file digests; the result does not depend on the split.
#pragma once

#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/model/mmap_file.h"
#include "runtime/model/weight_digest.h"

namespace conveyor {

class WeightHasher {
 public:
  // Starts at once on `threads` background threads; the files are mapped, so hashing and the weight
  // loader share the page cache (whichever touches a page first pays for reading it).
  WeightHasher(const std::string& model_path, int rank, int world, int threads);
  ~WeightHasher();  // stops early and joins: an error path must not wait for a full pass
  WeightHasher(const WeightHasher&) = delete;
  WeightHasher& operator=(const WeightHasher&) = delete;

  const std::vector<WeightFileInfo>& files() const { return files_; }  // without digests
  // Waits for this rank's work; rethrows a checksum mismatch. This rank's chunk digests as words
  // (high, low per chunk), in the order of its entries of the flat chunk list.
  std::vector<uint64_t> wait();

 private:
  void work(int thread, int threads);
  void join();

  std::vector<WeightFileInfo> files_;
  std::vector<std::unique_ptr<MappedFile>> maps_;
  std::vector<ChunkRef> mine_;
  std::vector<ChunkDigest> mine_digests_;
  std::vector<size_t> verify_;
  std::vector<std::thread> pool_;
  std::atomic<bool> stop_{false};
  std::mutex error_mu_;
  std::exception_ptr error_;
};

// File digests from every rank's wait() words (per_rank[r] from rank r of `world`).
std::vector<WeightFileInfo> assemble_weight_digests(std::vector<WeightFileInfo> files,
                                                    const std::vector<std::vector<uint64_t>>& per_rank);

// Threads per rank for hashing: a quarter of the cores a rank gets, at least one.
int weight_hash_threads(int local_ranks);

}  // namespace conveyor
