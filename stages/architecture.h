// What the layer code needs to know about a model, derived once from its ModelSpec and the TP size.
// llama, mistral and qwen2 differ only in data here: QKV bias (qwen2), a sliding attention window
// (mistral, qwen2 with use_sliding_window), tied embeddings and the rope rule; no layer code branches
// on the architecture name. A real structural difference would get its own file next to this one.
#pragma once

#include "runtime/model/spec.h"
#include "stages/backend.h"

namespace conveyor {

struct ModelTraits {
  int hidden = 0;
  int intermediate_local = 0;  // this TP rank's share
  int vocab = 0;
  float rms_norm_eps = 0.f;
  bool qkv_bias = false;
  bool tie_word_embeddings = false;
  AttentionConfig attention;  // this rank's heads, scale, sliding window
  RopeParams rope;
};

// Throws (via check_tensor_parallel) when the spec cannot be split over tp_size ranks.
ModelTraits model_traits(const ModelSpec& spec, int tp_size);

}  // namespace conveyor
