// WeightHasher (see weight_hasher.h).
#include "runtime/model/weight_hasher.h"

#include <algorithm>

#include "runtime/core/error.h"
#include "runtime/model/weight_checksum.h"

namespace conveyor {

int weight_hash_threads(int local_ranks) {
  int cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, cores / std::max(1, local_ranks) / 4);
}

WeightHasher::WeightHasher(const std::string& model_path, int rank, int world, int threads)
    : files_(list_weight_files(model_path)) {
  for (const WeightFileInfo& f : files_) maps_.push_back(std::make_unique<MappedFile>(f.path));
  std::vector<ChunkRef> all = all_chunks(files_);
  for (size_t i = static_cast<size_t>(rank); i < all.size(); i += static_cast<size_t>(world)) mine_.push_back(all[i]);
  mine_digests_.resize(mine_.size());
  for (size_t f = static_cast<size_t>(rank); f < files_.size(); f += static_cast<size_t>(world)) verify_.push_back(f);
  int n = std::max(1, threads);
  for (int t = 0; t < n; ++t) pool_.emplace_back([this, t, n] { work(t, n); });
}

WeightHasher::~WeightHasher() {
  stop_ = true;
  join();
}

void WeightHasher::join() {
  for (auto& t : pool_)
    if (t.joinable()) t.join();
  pool_.clear();
}

void WeightHasher::work(int thread, int threads) {
  try {
    // Published checksums first: one whole file per task, the longest work, spread over the threads.
    for (size_t i = static_cast<size_t>(thread); i < verify_.size() && !stop_; i += static_cast<size_t>(threads)) {
      const std::string& path = files_[verify_[i]].path;
      if (auto expected = expected_sha256(path)) verify_sha256(path, *expected);
    }
    for (size_t i = static_cast<size_t>(thread); i < mine_.size() && !stop_; i += static_cast<size_t>(threads)) {
      const MappedFile& m = *maps_[mine_[i].file];
      mine_digests_[i] = digest_chunk(m.data(), m.size(), mine_[i].chunk);
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (!error_) error_ = std::current_exception();
  }
}

std::vector<uint64_t> WeightHasher::wait() {
  join();
  if (error_) std::rethrow_exception(error_);
  std::vector<uint64_t> words;
  for (const ChunkDigest& d : mine_digests_) words.insert(words.end(), {d.high, d.low});
  return words;
}

std::vector<WeightFileInfo> assemble_weight_digests(std::vector<WeightFileInfo> files,
                                                    const std::vector<std::vector<uint64_t>>& per_rank) {
  const size_t world = per_rank.size();
  std::vector<ChunkRef> all = all_chunks(files);
  std::vector<std::vector<ChunkDigest>> per_file(files.size());
  for (size_t f = 0; f < files.size(); ++f) per_file[f].resize(digest_chunk_count(files[f].size));
  std::vector<size_t> next(world);
  for (size_t i = 0; i < all.size(); ++i) {
    size_t r = i % world;
    size_t at = 2 * next[r]++;
    CONVEYOR_CHECK(at + 1 < per_rank[r].size(), "internal: rank ", r, " sent too few chunk digests");
    per_file[all[i].file][all[i].chunk] = {per_rank[r][at], per_rank[r][at + 1]};
  }
  for (size_t f = 0; f < files.size(); ++f) files[f].digest = combine_chunk_digests(per_file[f]);
  return files;
}

}  // namespace conveyor
