// WeightHashing (see weight_hashing.h). Files are mapped, not read, so the hashing threads and the
// weight loader share the page cache: whichever touches a page first pays for the disk read.
#include "launch/weight_hashing.h"

#include <algorithm>

#include "runtime/core/error.h"
#include "runtime/model/weight_checksum.h"

namespace conveyor {

int weight_hash_threads(int local_ranks) {
  int cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, cores / std::max(1, local_ranks) / 4);
}

WeightHashing::WeightHashing(const std::string& model_path, int rank, int world, int threads)
    : files_(list_weight_files(model_path)), rank_(rank), world_(world) {
  for (const WeightFileInfo& f : files_) maps_.push_back(std::make_unique<MappedFile>(f.path));
  std::vector<ChunkRef> all = all_chunks(files_);
  for (size_t i = static_cast<size_t>(rank); i < all.size(); i += static_cast<size_t>(world)) mine_.push_back(all[i]);
  mine_digests_.resize(mine_.size());
  for (size_t f = static_cast<size_t>(rank); f < files_.size(); f += static_cast<size_t>(world)) verify_.push_back(f);
  int n = std::max(1, threads);
  for (int t = 0; t < n; ++t) pool_.emplace_back([this, t, n] { work(t, n); });
}

WeightHashing::~WeightHashing() { join(); }

void WeightHashing::join() {
  for (auto& t : pool_)
    if (t.joinable()) t.join();
  pool_.clear();
}

void WeightHashing::work(int thread, int threads) {
  try {
    // Published checksums first: one whole file per task, the slowest work, spread over the threads.
    for (size_t i = static_cast<size_t>(thread); i < verify_.size(); i += static_cast<size_t>(threads)) {
      const std::string& path = files_[verify_[i]].path;
      if (auto expected = expected_sha256(path)) verify_sha256(path, *expected);
    }
    for (size_t i = static_cast<size_t>(thread); i < mine_.size(); i += static_cast<size_t>(threads)) {
      const MappedFile& m = *maps_[mine_[i].file];
      mine_digests_[i] = digest_chunk(m.data(), m.size(), mine_[i].chunk);
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (!error_) error_ = std::current_exception();
  }
}

std::vector<WeightFileInfo> WeightHashing::finish(MPI_Comm comm) {
  join();
  if (error_) std::rethrow_exception(error_);
  // Rank r's chunks are entries r, r + world, ... of the flat list, so rank 0 can place them back.
  std::vector<uint64_t> words;
  for (const ChunkDigest& d : mine_digests_) words.insert(words.end(), {d.high, d.low});
  int count = static_cast<int>(words.size());
  std::vector<int> counts(static_cast<size_t>(world_)), offsets(static_cast<size_t>(world_));
  CONVEYOR_MPI_CHECK(MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm));
  for (int r = 1; r < world_; ++r) offsets[r] = offsets[r - 1] + counts[r - 1];
  std::vector<uint64_t> gathered(rank_ == 0 ? static_cast<size_t>(offsets.back() + counts.back()) : 0);
  CONVEYOR_MPI_CHECK(MPI_Gatherv(words.data(), count, MPI_UINT64_T, gathered.data(), counts.data(), offsets.data(),
                                 MPI_UINT64_T, 0, comm));
  if (rank_ != 0) return files_;
  std::vector<ChunkRef> all = all_chunks(files_);
  std::vector<std::vector<ChunkDigest>> per_file(files_.size());
  for (size_t f = 0; f < files_.size(); ++f) per_file[f].resize(digest_chunk_count(files_[f].size));
  std::vector<size_t> next(static_cast<size_t>(world_));
  for (size_t i = 0; i < all.size(); ++i) {
    size_t r = i % static_cast<size_t>(world_);
    size_t at = static_cast<size_t>(offsets[r]) + 2 * next[r]++;
    per_file[all[i].file][all[i].chunk] = {gathered[at], gathered[at + 1]};
  }
  std::vector<WeightFileInfo> out = files_;
  for (size_t f = 0; f < out.size(); ++f) out[f].digest = combine_chunk_digests(per_file[f]);
  return out;
}

}  // namespace conveyor
