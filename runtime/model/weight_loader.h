// WeightLoader: turns a checkpoint (WeightSource) into the fp32 host tensors one rank holds, named
// by the internal naming of weights_layout.h and laid out as HF does. On construction it checks the
// checkpoint against the ModelSpec without reading data: every weight present once with its expected
// shape and a convertible dtype, nothing unexpected, one dtype (safetensors); KV cache scales
// (weights_kv_scales.h) are expected too and become `layers.N.k_scale` / `v_scale` entries. load_share returns a
// lazy WeightSet: each tensor is read only when materialised. GGUF llama Q/K rows, permuted for
// interleaved rotary by llama.cpp's converter, are put back in HF order, so both formats agree.
// open_share is the one place that picks a rank's weight source (dummy values or a checkpoint).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "runtime/model/host_tensor.h"
#include "runtime/model/spec.h"
#include "runtime/model/weight_set.h"
#include "runtime/model/weights_kv_scales.h"
#include "runtime/model/weights_layout.h"
#include "runtime/model/weights_source.h"

namespace conveyor {

class WeightLoader {
 public:
  // Shares the source: sets from load_share read it lazily and keep it open until they are gone.
  // (No borrowing overload: a set outliving a borrowed source would read freed memory.)
  WeightLoader(const ModelSpec& spec, std::shared_ptr<const WeightSource> source);

  // One weight's share, read now. With a tied LM head, "lm_head" is read from the embedding.
  HostTensor load(const WeightId& id, const WeightShare& share) const;
  // The share's tensors, none read yet (share errors, e.g. a bad TP size, are thrown here).
  WeightSet load_share(const WeightShare& share) const;

  // Every tensor read is scanned for NaN/Inf and refused naming it (on unless turned off).
  void set_check_finite(bool on) { check_finite_ = on; }

  // The checkpoint's name for a weight (the embedding's for a tied LM head).
  std::string source_name(const WeightId& id) const;

 private:
  void check_source() const;
  // Source row holding HF row `row` of a weight (differs only for GGUF llama Q/K).
  int64_t source_row(const WeightId& id, int64_t row) const;
  // Converts the share `t` describes (header.numel() floats) into out, then scans it.
  void read(const WeightId& id, const HostTensor& t, float* out) const;
  void read_values(const WeightId& id, const HostTensor& t, float* out) const;

  ModelSpec spec_;  // a copy: lazy sets may outlive the caller's spec
  std::shared_ptr<const WeightSource> source_;
  std::vector<KvScaleNames> kv_scales_;  // the checkpoint's KV cache scales per layer (weights_kv_scales.h)
  bool unpermute_qk_ = false;
  bool check_finite_ = true;
};

// Where a rank's weights come from (model.load_format, model.path, runtime.seed).
struct WeightOrigin {
  bool dummy = false;  // load_format dummy: values from `seed`, no checkpoint read
  std::string path;    // the checkpoint: an HF directory or a .gguf file
  uint64_t seed = 0;
  bool check_finite = true;  // model.check_finite: refuse a tensor holding NaN/Inf
};

// The share's weights from `origin`: dummy values (make_dummy_weights), or a lazy set over the
// checkpoint that keeps it open. Throws when a checkpoint is asked for and origin.path is empty.
WeightSet open_share(const ModelSpec& spec, const WeightShare& share, const WeightOrigin& origin);

}  // namespace conveyor
