// WeightBank (see weight_bank.h). A take validates every name and shape before reading or erasing
// anything, so a wiring error leaves the bank as it was and names the weights involved.
#include "stages/weight_bank.h"

#include <algorithm>
#include <set>
#include <utility>

#include "kernels/cpu/fp8.h"
#include "runtime/core/error.h"
#include "runtime/core/strings.h"

namespace conveyor {

const HostTensor& WeightBank::peek(const std::string& name) const {
  CONVEYOR_CHECK(weights_.has(name), "weight '", name, "' is not among the ", weights_.size(),
                 " weights loaded for this stage (already taken, or not in its share)");
  return weights_.header(name);
}

Tensor WeightBank::take(const std::string& name) {
  HostTensor t = peek(name);  // the header: no values
  t.data = std::move(take_scratch_);
  t.data.resize(static_cast<size_t>(t.numel()));
  weights_.fill(name, t.data.data());
  weights_.erase(name);
  return adopt_reusing(std::move(t));
}

void WeightBank::fill_stacked(const std::vector<std::string>& names, float* dst) {
  for (const std::string& n : names) {
    const int64_t count = weights_.header(n).numel();
    weights_.fill(n, dst);
    weights_.erase(n);
    dst += count;
  }
}

Tensor WeightBank::adopt_reusing(HostTensor&& t) {
  Tensor adopted = ops_.adopt(std::move(t));
  take_scratch_ = std::move(t.data);  // NOLINT(bugprone-use-after-move): adopt takes an rvalue reference
  return adopted;
}

float WeightBank::take_scalar(const std::string& name) {
  const HostTensor& h = peek(name);
  CONVEYOR_CHECK(h.numel() == 1, "weight '", name, "' holds ", h.numel(), " values, expected one (a per-tensor scale)");
  const HostTensor t = weights_.materialize(name);
  weights_.erase(name);
  return t.data.at(0);
}

namespace {

std::string shape_text(const std::vector<int64_t>& s) {
  std::vector<std::string> parts;
  for (int64_t d : s) parts.push_back(std::to_string(d));
  return "[" + join(parts, ", ") + "]";
}

}  // namespace

Tensor WeightBank::take_concat_rows(const std::vector<std::string>& names) {
  CONVEYOR_CHECK(!names.empty(), "internal: take_concat_rows of no weights");
  CONVEYOR_CHECK(std::set<std::string>(names.begin(), names.end()).size() == names.size(),
                 "internal: take_concat_rows names a weight twice: ", join(names, ", "));
  const HostTensor& first = peek(names[0]);
  const size_t rank = first.shape.size();
  HostTensor out;
  out.name = join(names, "+");
  out.shape = first.shape;
  out.shape[0] = 0;
  std::vector<std::string> shapes;
  bool fits = rank == 1 || rank == 2;
  for (const std::string& n : names) {
    const HostTensor& h = peek(n);
    shapes.push_back(n + " " + shape_text(h.shape));
    fits = fits && h.shape.size() == rank && (rank == 1 || h.shape[1] == first.shape[1]);
    if (fits) out.shape[0] += h.shape[0];
  }
  CONVEYOR_CHECK(fits, "weights ", join(shapes, ", "), " cannot be stacked: all must be 2-D with the same number of ",
                 "columns, or all 1-D");
  // The result is no share of one full tensor: it is its own whole.
  out.full_shape = out.shape;
  out.data = std::move(take_scratch_);
  out.data.resize(static_cast<size_t>(out.numel()));
  fill_stacked(names, out.data.data());
  return adopt_reusing(std::move(out));
}

Tensor WeightBank::take_linear(const std::vector<std::string>& names) {
  if (!fp8_linears_) return take_concat_rows(names);
  const bool checkpoint = weights_.has(names[0] + ".weight_scale");
  // Scales and codes of each part, read before take_concat_rows erases the weights.
  std::vector<float> scales;
  float input_scale = 0.f;
  for (const std::string& n : names) {
    if (!checkpoint) break;
    const HostTensor w = weights_.header(n);
    HostTensor s = weights_.materialize(n + ".weight_scale");
    weights_.erase(n + ".weight_scale");
    for (int64_t r = 0; r < w.shape[0]; ++r) scales.push_back(s.data[s.data.size() == 1 ? 0 : static_cast<size_t>(r)]);
    if (weights_.has(n + ".input_scale")) {
      input_scale = std::max(input_scale, weights_.materialize(n + ".input_scale").data.at(0));
      weights_.erase(n + ".input_scale");
    }
  }
  const HostTensor& first = peek(names[0]);
  CONVEYOR_CHECK(first.shape.size() == 2, "internal: linear '", names[0], "' is not 2-D");
  Fp8HostWeight out;
  out.name = join(names, "+");
  out.cols = first.shape[1];
  for (const std::string& n : names) out.rows += peek(n).shape[0];
  const auto count = static_cast<size_t>(out.rows * out.cols);
  out.codes = std::move(code_scratch_);
  out.codes.resize(count);  // within the capacity of an earlier linear: no new pages
  out.input_scale = input_scale;
  if (stack_scratch_.size() < count) stack_scratch_.resize(count);
  float* const values = stack_scratch_.data();  // one stack in fp32
  fill_stacked(names, values);
  if (checkpoint) {  // already e4m3 values: encoding is exact
    const auto total = static_cast<int64_t>(count);
#pragma omp parallel for schedule(static) if (total >= (1 << 16))
    for (int64_t i = 0; i < total; ++i) out.codes[static_cast<size_t>(i)] = fp8_e4m3_from_float(values[i]);
    out.scales = std::move(scales);
  } else {
    out.scales.resize(static_cast<size_t>(out.rows));
    quantize_rows_fp8_ref(out.codes.data(), out.scales.data(), values, out.rows, out.cols);
  }
  Tensor adopted = ops_.adopt_fp8(std::move(out));
  // The backends copy the codes (to the device, or into fp32 values) and leave the vector to us; one
  // that kept it would leave this empty, and the next linear allocates anew.
  code_scratch_ = std::move(out.codes);  // NOLINT(bugprone-use-after-move): adopt_fp8 takes an rvalue reference
  return adopted;
}

size_t device_weight_bytes(const WeightSet& weights, bool fp8_linears, size_t elem) {
  static const char* const kLinears[] = {".q_proj", ".k_proj", ".v_proj", ".o_proj", ".gate_proj", ".up_proj",
                                         ".down_proj"};
  size_t bytes = 0;
  for (const std::string& name : weights.names()) {
    const HostTensor& h = weights.header(name);
    const auto n = static_cast<size_t>(h.numel());
    bool linear = false;
    for (const char* suffix : kLinears) linear = linear || ends_with(name, suffix);
    if (fp8_linears && linear) bytes += n + static_cast<size_t>(h.shape[0]) * sizeof(float);
    else if (ends_with(name, "_scale")) bytes += n * sizeof(float);
    else bytes += n * elem;
  }
  return bytes;
}

void WeightBank::finish() {
  if (!weights_.empty())
    CONVEYOR_THROW("internal: weights loaded but not used by any layer: ", join(weights_.names(), ", "));
  stack_scratch_ = std::vector<float>();
  code_scratch_ = std::vector<uint8_t>();
  take_scratch_ = std::vector<float>();
  ops_.end_of_load();
}

}  // namespace conveyor
