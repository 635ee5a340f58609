// The batch buckets of decode CUDA graphs, as a pure rule: n sequences pad to the next power of two
// up to kMaxDecodeBucket, above which a step runs eagerly, unpadded. DecodeGraphs (the executor) and
// the partitioner's cost model (which predicts the padded rows) both read it from here, so neither
// the cost model nor a CPU-only build needs the executor.
#pragma once

namespace conveyor {

constexpr int kMaxDecodeBucket = 256;

// The bucket n sequences pad to (1, 2, 4, ... kMaxDecodeBucket); 0 when n <= 0 or n > kMaxDecodeBucket.
constexpr int decode_bucket_for(int n) {
  if (n <= 0 || n > kMaxDecodeBucket) return 0;
  int b = 1;
  while (b < n) b *= 2;
  return b;
}

}  // namespace conveyor
