// WeightLoader: turns a checkpoint (WeightSource) into the fp32 host tensors one rank holds, named
// by the internal naming of weights_layout.h and laid out as HF does. On construction it checks the
// checkpoint against the ModelSpec: every weight present once with its expected shape, nothing
// unexpected, one dtype (safetensors). GGUF llama Q/K rows, permuted for interleaved rotary by
// llama.cpp's converter, are put back in HF order, so both formats give identical tensors.
#pragma once

#include <cstddef>
#include <map>
#include <string>

#include "runtime/host_tensor.h"
#include "runtime/model_spec.h"
#include "runtime/weights_layout.h"
#include "runtime/weights_source.h"

namespace conveyor {

// The tensors of one share, by internal name.
struct WeightSet {
  std::map<std::string, HostTensor> tensors;
  size_t bytes() const;  // host bytes held
  const HostTensor& at(const std::string& name) const;
};

class WeightLoader {
 public:
  // Keeps references: spec and source must outlive the loader.
  WeightLoader(const ModelSpec& spec, const WeightSource& source);

  // One weight's share. With a tied LM head, "lm_head" is read from the embedding.
  HostTensor load(const WeightId& id, const WeightShare& share) const;
  WeightSet load_share(const WeightShare& share) const;

  // The checkpoint's name for a weight (the embedding's for a tied LM head).
  std::string source_name(const WeightId& id) const;

 private:
  void check_source() const;
  // Source row holding HF row `row` of a weight (differs only for GGUF llama Q/K).
  int64_t source_row(const WeightId& id, int64_t row) const;

  const ModelSpec& spec_;
  const WeightSource& source_;
  bool unpermute_qk_ = false;
};

}  // namespace conveyor
