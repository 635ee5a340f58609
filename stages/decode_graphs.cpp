// DecodeGraphs (see decode_graphs.h): bucket and stride arithmetic, padding, the LRU map.
#include "stages/decode_graphs.h"

#include <algorithm>

#include "runtime/core/error.h"

namespace conveyor {

bool DecodeGraphs::is_pure_decode(const StepPlan& plan) {
  if (plan.seqs.empty()) return false;
  for (const SeqChunk& s : plan.seqs)
    if (s.tokens.size() != 1) return false;
  return true;
}

int DecodeGraphs::stride_for(int max_blocks) {
  int s = kMinStride;
  while (s < max_blocks) s *= 2;
  return s;
}

BatchInfo DecodeGraphs::pad(const BatchInfo& b, int bucket, int stride) {
  const int n = b.num_seqs();
  CONVEYOR_CHECK(n == b.num_tokens() && n <= bucket && b.max_blocks <= stride,
                 "internal: decode graph padding of ", n, " sequences (", b.num_tokens(), " tokens, ", b.max_blocks,
                 " blocks) to ", bucket, " x ", stride);
  BatchInfo p;
  p.max_blocks = stride;
  p.positions = b.positions;
  p.positions.resize(static_cast<size_t>(bucket), 0);
  if (!b.token_ids.empty()) {
    p.token_ids = b.token_ids;
    p.token_ids.resize(static_cast<size_t>(bucket), 0);
  }
  p.query_start.resize(static_cast<size_t>(bucket) + 1);
  for (int i = 0; i <= bucket; ++i) p.query_start[static_cast<size_t>(i)] = i;
  p.block_tables.assign(static_cast<size_t>(bucket) * stride, -1);
  for (int s = 0; s < n; ++s)
    std::copy_n(b.block_tables.begin() + static_cast<std::ptrdiff_t>(s) * b.max_blocks, b.max_blocks,
                p.block_tables.begin() + static_cast<std::ptrdiff_t>(s) * stride);
  p.rope_seq_len = b.rope_seq_len;
  p.rope_seq_len.resize(static_cast<size_t>(bucket), 1);
  p.logit_rows = b.logit_rows;
  for (int r = n; static_cast<int>(p.logit_rows.size()) < bucket; ++r) p.logit_rows.push_back(std::min(r, bucket - 1));
  return p;
}

DecodeGraphs::Entry* DecodeGraphs::find(int bucket, int stride) {
  auto it = entries_.find({bucket, stride});
  if (it == entries_.end()) return nullptr;
  it->second.used = ++clock_;
  return &it->second;
}

DecodeGraphs::Entry& DecodeGraphs::add(int bucket, int stride) {
  while (entries_.size() >= kMaxGraphs) {
    auto oldest = entries_.begin();
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
      if (it->second.used < oldest->second.used) oldest = it;
    entries_.erase(oldest);
  }
  Entry& e = entries_[{bucket, stride}];
  e.used = ++clock_;
  return e;
}

}  // namespace conveyor
