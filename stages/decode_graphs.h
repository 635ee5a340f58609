// DecodeGraphs: the CUDA graphs of a stage's decode steps (every sequence one new token), one per
// (batch bucket, block-table stride). A decode batch of n sequences is padded to the next bucket
// (1, 2, 4, 8, 16, 32, 64, 128, 256) with dummy sequences whose block table is all -1, so their KV
// writes are dropped and their attention reads nothing; the stride (a power of two >= the longest
// table) bounds the context, so one graph serves every step until a table outgrows it. The first
// step of a bucket runs eagerly (GEMM autotuning, pools, workspaces), the next one captures.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <utility>

#include "runtime/engine/step_plan.h"
#include "stages/backend.h"
#include "stages/decode_buckets.h"

namespace conveyor {

class DecodeGraphs {
 public:
  static constexpr int kMaxBucket = kMaxDecodeBucket;
  static constexpr int kMinStride = 8;
  static constexpr size_t kMaxGraphs = 32;  // least recently used ones go beyond this

  struct Entry {
    std::unique_ptr<OpsGraph> graph;
    Tensor input;   // [bucket, hidden]: the previous stage's hidden states are copied here (not on stage 0)
    Tensor hidden;  // [bucket, hidden] after the stage's layers
    Tensor logits;  // [bucket, vocab] fp32 on the last stage
    uint64_t used = 0;
  };

  // Whether the plan is pure decode (every chunk one token) and not empty.
  static bool is_pure_decode(const StepPlan& plan);
  // The bucket n sequences pad to; 0 when n exceeds kMaxBucket (decode_buckets.h).
  static int bucket_for(int n) { return decode_bucket_for(n); }
  static int stride_for(int max_blocks);
  // b padded to `bucket` sequences of one token, block tables re-laid at `stride`, logit rows
  // padded to `bucket` (the real ones first).
  static BatchInfo pad(const BatchInfo& b, int bucket, int stride);

  bool warmed(int bucket) const { return warmed_.count(bucket) > 0; }
  void mark_warmed(int bucket) { warmed_.insert(bucket); }
  // The graph of (bucket, stride), or null; marks it used.
  Entry* find(int bucket, int stride);
  // A new (empty) entry for (bucket, stride), evicting the least recently used beyond kMaxGraphs.
  Entry& add(int bucket, int stride);
  void erase(int bucket, int stride) { entries_.erase({bucket, stride}); }
  size_t size() const { return entries_.size(); }

 private:
  std::map<std::pair<int, int>, Entry> entries_;
  std::set<int> warmed_;
  uint64_t clock_ = 0;
};

}  // namespace conveyor
