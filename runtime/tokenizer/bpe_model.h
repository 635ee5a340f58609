// The BPE model: vocabulary, merge ranks, and the merge loop that turns one pre-tokenized piece into
// ids. Merges apply lowest rank first (leftmost on ties) through a priority queue, so a long piece
// costs O(n log n), not O(n^2). Byte fallback (<0xXX> tokens), <unk> (optionally fused) and
// ignore_merges behave as in HF `tokenizers`. Thread-safe; a bounded cache keeps frequent pieces.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace conveyor {

struct BpeOptions {
  int32_t unk_id = -1;        // -1: characters outside the vocabulary (and bytes) are dropped, as HF does
  bool fuse_unk = false;      // consecutive unknown characters become one <unk>
  bool byte_fallback = false; // unknown characters become their <0xXX> byte tokens when all exist
  bool ignore_merges = false; // a piece that is itself in the vocabulary is taken whole
};

class BpeModel {
 public:
  // `vocab[i]` is the token of id i (an empty string for an unused id). A merge "a b" needs a, b and
  // ab in the vocabulary; `origin` names the source in errors.
  BpeModel(std::vector<std::string> vocab, const std::vector<std::pair<std::string, std::string>>& merges,
           const BpeOptions& options, const std::string& origin);

  void tokenize(const std::string& piece, std::vector<int32_t>& out) const;

  int32_t vocab_size() const { return static_cast<int32_t>(vocab_.size()); }
  int32_t token_to_id(const std::string& token) const;  // -1 when absent
  const std::string& id_to_token(int32_t id) const { return vocab_[static_cast<size_t>(id)]; }
  // The byte of a <0xXX> token when byte fallback is on, else -1.
  int byte_of(int32_t id) const;
  const BpeOptions& options() const { return options_; }

 private:
  struct MergeInfo {
    int32_t rank;
    int32_t new_id;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  void merge_word(const std::string& piece, std::vector<int32_t>& out) const;
  void initial_symbols(const std::string& piece, std::vector<int32_t>& ids) const;

  std::vector<std::string> vocab_;
  std::unordered_map<std::string, int32_t> ids_;
  std::unordered_map<uint64_t, MergeInfo> merges_;
  std::array<int32_t, 256> byte_ids_{};
  std::unordered_map<int32_t, int> byte_of_id_;
  BpeOptions options_;

  static constexpr size_t kCacheCapacity = 20000;
  static constexpr size_t kCacheMaxPieceBytes = 256;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace conveyor
