// WeightBank: a rank's lazy weights (WeightSet) handed to the backend one tensor at a time, by
// internal name. take() reads a tensor only then (checkpoint, GGUF dequant or dummy hash), adopts it
// and drops the host copy, so host memory for weights peaks at one tensor (one concatenation for
// take_concat_rows), not the share. FP8 linears are quantized one tensor (stack) at a time, so no
// full-precision copy of the model is ever built. finish() checks nothing was left unused (a wiring bug otherwise).
#pragma once

#include <string>
#include <vector>

#include "runtime/model/weight_set.h"
#include "stages/backend.h"

namespace conveyor {

class WeightBank {
 public:
  // fp8_linears: take_linear hands the backend FP8 weights (from the checkpoint's codes and scales
  // when it has them, else quantized here per output channel).
  WeightBank(WeightSet&& weights, Ops& ops, bool fp8_linears = false)
      : weights_(std::move(weights)), ops_(ops), fp8_linears_(fp8_linears) {}

  bool has(const std::string& name) const { return weights_.has(name); }
  // Name, shapes and split of a weight not yet taken; no data (nothing is read).
  const HostTensor& peek(const std::string& name) const;
  Tensor take(const std::string& name);
  // A one-element weight (a per-tensor scale) read into host memory, not handed to the backend.
  float take_scalar(const std::string& name);
  // Concatenation of weights along their first dimension, read straight into one buffer, for one
  // GEMM (gate|up, q|k|v): all 2-D with equal columns ([sum rows, cols]) or all 1-D ([sum n]).
  Tensor take_concat_rows(const std::vector<std::string>& names);
  Tensor take_concat_rows(const std::string& a, const std::string& b) { return take_concat_rows({a, b}); }
  // A layer linear: take_concat_rows, or with fp8_linears the same rows as one FP8 weight. Stacked
  // linears share one static input_scale (the largest, as they read the same input).
  Tensor take_linear(const std::vector<std::string>& names);
  void finish();  // throws naming any weight no layer took; else frees the load's host buffers

  // fp32 bytes of the weights not yet taken (none of them is held in host memory).
  size_t pending_bytes() const { return weights_.bytes(); }

 private:
  // The weights `names` read one after the other into dst (their numel in all) and erased.
  void fill_stacked(const std::vector<std::string>& names, float* dst);
  Tensor adopt_reusing(HostTensor&& t);  // ops_.adopt, then take_scratch_ = whatever buffer it left
  WeightSet weights_;
  Ops& ops_;
  bool fp8_linears_ = false;
  // take_linear's host buffers, reused from one linear to the next: a fresh fp32 stack and code
  // buffer per linear page-faulted (and zeroed) every byte again, which made a 70B FP8 start spend
  // ~5 minutes in the kernel (round 10). Grown to the largest linear, freed by finish().
  std::vector<float> stack_scratch_;
  std::vector<uint8_t> code_scratch_;
  // take's and take_concat_rows' values, likewise reused where the backend copies them (CUDA); a
  // backend that keeps them as its storage (CPU) takes the buffer, and the next weight allocates anew.
  std::vector<float> take_scratch_;
};

// Device bytes of a set's weights once adopted: elem bytes per value, except FP8 layer linears
// (fp8_linears) at one byte per value plus an fp32 scale per row; a checkpoint's scale entries fp32.
size_t device_weight_bytes(const WeightSet& weights, bool fp8_linears, size_t elem);

}  // namespace conveyor
