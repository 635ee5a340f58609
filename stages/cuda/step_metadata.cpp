// StepMetadata (see step_metadata.h).
#include "stages/cuda/step_metadata.h"

#include <algorithm>
#include <cstring>

#include "stages/decode_buckets.h"
#include "stages/decode_graphs.h"

namespace conveyor {
namespace {

int fixed_bucket(const StepMetadataLimits& l) {
  return decode_bucket_for(static_cast<int>(std::min<int64_t>(l.max_seqs, kMaxDecodeBucket)));
}

int fixed_stride(const StepMetadataLimits& l) {
  return DecodeGraphs::stride_for(static_cast<int>(std::max<int64_t>(l.max_blocks_per_seq, 1)));
}

// ints of a packed eager step at the limits: ids, positions and logit rows per token, query starts,
// block tables per sequence, the max context.
size_t eager_ints(const StepMetadataLimits& l) {
  const auto tokens = static_cast<size_t>(l.max_tokens), seqs = static_cast<size_t>(l.max_seqs);
  return 3 * tokens + seqs + 1 + seqs * static_cast<size_t>(l.max_blocks_per_seq) + 1;
}

// ints of the fixed layout: four arrays of `bucket` (+1 for query starts), the max context, then the
// block tables at `stride`.
size_t fixed_ints(int bucket, int stride) {
  const auto b = static_cast<size_t>(bucket);
  return 4 * b + 2 + b * static_cast<size_t>(stride);
}

}  // namespace

StepMetadata::StepMetadata(const StepMetadataLimits& limits)
    : fixed_bucket_(fixed_bucket(limits)), fixed_stride_(fixed_stride(limits)) {
  const size_t eager = eager_ints(limits) * sizeof(int32_t);
  const size_t fixed = fixed_ints(fixed_bucket_, fixed_stride_) * sizeof(int32_t);
  staging_.reserve(std::max(eager, fixed));
  eager_.reserve(eager, nullptr);
  fixed_.reserve(fixed, nullptr);
}

size_t StepMetadata::device_bytes(const StepMetadataLimits& limits) {
  return GrowingBuffer::allocation_for(eager_ints(limits) * sizeof(int32_t)) +
         GrowingBuffer::allocation_for(fixed_ints(fixed_bucket(limits), fixed_stride(limits)) * sizeof(int32_t));
}

StepMetadata::Placement StepMetadata::packed(const Sizes& sizes) {
  Placement p;
  for (size_t i = 0; i < sizes.size(); ++i) {
    p.offset[i] = p.ints;
    p.ints += sizes[i];
  }
  p.offset[5] = p.ints++;
  return p;
}

StepMetadata::Placement StepMetadata::fixed_placement(const Sizes& sizes) const {
  const auto b = static_cast<size_t>(fixed_bucket_);
  Placement p;
  if (sizes[0] > b || sizes[1] > b || sizes[2] > b + 1 || sizes[4] > b ||
      sizes[3] > b * static_cast<size_t>(fixed_stride_))
    return p;
  p.offset = {0, b, 2 * b, 4 * b + 2, 3 * b + 1, 4 * b + 1};
  p.ints = p.offset[3] + sizes[3];
  return p;
}

StepMetadataOnDevice StepMetadata::upload(const BatchInfo& b, int32_t max_context, bool fixed, cudaStream_t stream) {
  const std::vector<int32_t>* parts[] = {&b.token_ids, &b.positions, &b.query_start, &b.block_tables, &b.logit_rows};
  Sizes sizes{};
  for (size_t i = 0; i < sizes.size(); ++i) sizes[i] = parts[i]->size();
  Placement at = fixed ? fixed_placement(sizes) : packed(sizes);
  GrowingBuffer* buf = fixed ? &fixed_ : &eager_;
  if (at.ints == 0) {  // a graph layout beyond the limits: packed, in a buffer of its own
    at = packed(sizes);
    buf = &overflow_[sizes];
  }
  const size_t bytes = at.ints * sizeof(int32_t);
  auto* host = static_cast<int32_t*>(staging_.acquire(bytes));
  auto* dev = static_cast<int32_t*>(buf->reserve(bytes, stream));
  StepMetadataOnDevice out;
  const int32_t** ptrs[] = {&out.token_ids, &out.positions, &out.query_start, &out.block_tables, &out.logit_rows};
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::memcpy(host + at.offset[i], parts[i]->data(), sizes[i] * sizeof(int32_t));
    *ptrs[i] = sizes[i] == 0 ? nullptr : dev + at.offset[i];
  }
  host[at.offset[5]] = max_context;
  out.max_context_len = dev + at.offset[5];
  staging_.copy_to_device(dev, bytes, stream);
  return out;
}

}  // namespace conveyor
