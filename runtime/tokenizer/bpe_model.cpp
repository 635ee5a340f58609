// BPE merge loop (see runtime/tokenizer/bpe_model.h). Symbols form a doubly linked list over a vector; the
// queue may hold stale entries, which are recognised (the pair no longer exists or changed) and skipped.
#include "runtime/tokenizer/bpe_model.h"

#include <cstdio>
#include <queue>

#include "runtime/core/error.h"
#include "runtime/tokenizer/utf8.h"

namespace conveyor {

BpeModel::BpeModel(std::vector<std::string> vocab, const std::vector<std::pair<std::string, std::string>>& merges,
                   const BpeOptions& options, const std::string& origin)
    : vocab_(std::move(vocab)), options_(options) {
  ids_.reserve(vocab_.size());
  for (size_t i = 0; i < vocab_.size(); ++i) {
    if (!vocab_[i].empty()) ids_.emplace(vocab_[i], static_cast<int32_t>(i));
  }
  CONVEYOR_CHECK(options_.unk_id < static_cast<int32_t>(vocab_.size()), origin, ": unk id ", options_.unk_id,
                 " is outside the vocabulary of ", vocab_.size(), " tokens");
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    const int32_t ia = token_to_id(a), ib = token_to_id(b), iab = token_to_id(a + b);
    CONVEYOR_CHECK(ia >= 0 && ib >= 0 && iab >= 0, origin, ": merge ", rank, " '", a, " ", b,
                   "' uses a token missing from the vocabulary ('",
                   ia < 0 ? a : ib < 0 ? b : a + b, "'); the merges do not belong to this vocabulary");
    merges_[pair_key(ia, ib)] = {static_cast<int32_t>(rank), iab};  // a repeated pair keeps the later rank
  }
  byte_ids_.fill(-1);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    byte_ids_[b] = token_to_id(name);
    if (byte_ids_[b] >= 0) byte_of_id_[byte_ids_[b]] = b;
  }
}

int32_t BpeModel::token_to_id(const std::string& token) const {
  auto it = ids_.find(token);
  return it == ids_.end() ? -1 : it->second;
}

int BpeModel::byte_of(int32_t id) const {
  if (!options_.byte_fallback) return -1;
  auto it = byte_of_id_.find(id);
  return it == byte_of_id_.end() ? -1 : it->second;
}

void BpeModel::tokenize(const std::string& piece, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  if (options_.ignore_merges) {
    const int32_t id = token_to_id(piece);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  const bool cacheable = piece.size() < kCacheMaxPieceBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = cache_.find(piece);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids;
  merge_word(piece, ids);
  out.insert(out.end(), ids.begin(), ids.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kCacheCapacity) cache_.clear();  // bounded; frequent pieces come back quickly
    cache_.emplace(piece, std::move(ids));
  }
}

// One id per character; unknown characters become byte tokens, <unk> (fused or not) or nothing.
void BpeModel::initial_symbols(const std::string& piece, std::vector<int32_t>& ids) const {
  int32_t pending_unk = -1;  // an <unk> waiting to be emitted (kept to fuse with the next one)
  size_t pos = 0;
  while (pos < piece.size()) {
    size_t n = utf8_valid_char_len(piece, pos);
    if (n == 0) n = 1;  // input was validated; only a vocabulary of broken strings gets here
    const std::string ch = piece.substr(pos, n);
    pos += n;
    const int32_t id = token_to_id(ch);
    if (id >= 0) {
      if (pending_unk >= 0) ids.push_back(pending_unk);
      pending_unk = -1;
      ids.push_back(id);
      continue;
    }
    if (options_.byte_fallback) {
      bool all = true;
      for (char c : ch) all = all && byte_ids_[static_cast<unsigned char>(c)] >= 0;
      if (all) {  // HF adds these without flushing a pending <unk>; the order follows it
        for (char c : ch) ids.push_back(byte_ids_[static_cast<unsigned char>(c)]);
        continue;
      }
    }
    if (options_.unk_id >= 0) {
      if (pending_unk >= 0 && !options_.fuse_unk) ids.push_back(pending_unk);
      pending_unk = options_.unk_id;
    }
  }
  if (pending_unk >= 0) ids.push_back(pending_unk);
}

void BpeModel::merge_word(const std::string& piece, std::vector<int32_t>& out) const {
  std::vector<int32_t> ids;
  initial_symbols(piece, ids);
  const int n = static_cast<int>(ids.size());
  std::vector<int> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Candidate {
    int32_t rank;
    int pos;
    int32_t new_id;
    bool operator<(const Candidate& o) const {  // std::priority_queue pops the largest: invert
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate> queue;
  auto push_pair = [&](int left) {
    if (left < 0 || next[left] < 0) return;
    auto it = merges_.find(pair_key(ids[left], ids[next[left]]));
    if (it != merges_.end()) queue.push({it->second.rank, left, it->second.new_id});
  };
  for (int i = 0; i + 1 < n; ++i) push_pair(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    const int left = top.pos;
    if (!alive[left] || next[left] < 0) continue;
    const int right = next[left];
    auto it = merges_.find(pair_key(ids[left], ids[right]));
    if (it == merges_.end() || it->second.new_id != top.new_id) continue;  // stale entry
    ids[left] = top.new_id;
    alive[right] = false;
    next[left] = next[right];
    if (next[right] >= 0) prev[next[right]] = left;
    push_pair(prev[left]);
    push_pair(left);
  }
  for (int i = 0; i < n; ++i) {
    if (alive[i]) out.push_back(ids[i]);
  }
}

}  // namespace conveyor
