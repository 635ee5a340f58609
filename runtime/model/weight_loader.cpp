// WeightLoader (see weight_loader.h). Rows are read independently, so the per-row loops run under
// OpenMP; an exception inside a worker is carried out of the parallel region and rethrown. The lazy
// set's fills share one copy of the loader (spec copy + shared source), never the caller's objects.
#include "runtime/model/weight_loader.h"

#include <cmath>
#include <exception>
#include <memory>
#include <set>
#include <utility>

#include "runtime/core/error.h"
#include "runtime/core/strings.h"
#include "runtime/model/weights_dummy.h"
#include "runtime/model/weights_fp8.h"
#include "runtime/model/weights_kv_scales.h"

namespace conveyor {
namespace {

std::string shape_text(const std::vector<int64_t>& s) {
  std::vector<std::string> parts;
  for (int64_t d : s) parts.push_back(std::to_string(d));
  return "[" + join(parts, ", ") + "]";
}

// Runs fn(i) for i in [0, n) in parallel; rethrows the first exception after the region.
template <typename Fn>
void parallel_for(int64_t n, Fn fn) {
  std::exception_ptr error;
#pragma omp parallel for schedule(static) if (n >= 256)
  for (int64_t i = 0; i < n; ++i) {
    try {
      fn(i);
    } catch (...) {
#pragma omp critical(conveyor_loader_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

// Non-finite values among n floats; a vectorisable pass, so the scan costs little next to the read.
int64_t count_non_finite(const float* x, int64_t n) {
  int64_t bad = 0;
#pragma omp parallel for reduction(+ : bad) schedule(static) if (n >= (1 << 16))
  for (int64_t i = 0; i < n; ++i) bad += std::isfinite(x[i]) ? 0 : 1;
  return bad;
}

}  // namespace

WeightLoader::WeightLoader(const ModelSpec& spec, std::shared_ptr<const WeightSource> source)
    : spec_(spec), source_(std::move(source)) {
  CONVEYOR_CHECK(source_ != nullptr, "internal: WeightLoader given no weight source");
  unpermute_qk_ = source_->format() == SourceFormat::kGguf && spec.architecture != Architecture::kQwen2;
  kv_scales_ = find_kv_scales(spec_, *source_);
  check_source();
}

std::string WeightLoader::source_name(const WeightId& id) const {
  WeightId src = id;
  if (id.kind == WeightKind::kLmHead && spec_.tie_word_embeddings) src = {WeightKind::kEmbedding, -1};
  return source_->format() == SourceFormat::kGguf ? gguf_name(src) : hf_name(src);
}

void WeightLoader::check_source() const {
  const WeightSource& source = *source_;
  std::set<std::string> expected;
  for (const WeightId& id : model_weights(spec_)) {
    std::string name = source_name(id);
    expected.insert(name);
    const SourceTensor& t = source.at(name);
    std::vector<int64_t> want = full_shape(spec_, id);
    CONVEYOR_CHECK(t.shape == want, "tensor '", name, "' in '", t.file, "' has shape ", shape_text(t.shape),
                   " but the model spec (", spec_.source, ") needs ", shape_text(want),
                   "; the config and the weights do not match");
    source.check_readable(name);
    for (const Fp8Companion& c : fp8_companions(spec_, id)) {
      expected.insert(c.hf);
      const SourceTensor& st = source.at(c.hf);
      CONVEYOR_CHECK(st.shape == c.shape, "scale '", c.hf, "' in '", st.file, "' has shape ", shape_text(st.shape),
                     " but ", spec_.quant.describe(), " needs ", shape_text(c.shape));
    }
  }
  for (const KvScaleNames& n : kv_scales_) expected.insert({n.k, n.v});
  if (spec_.quant.checkpoint != CheckpointQuant::kNone) check_fp8_dtypes(spec_, source);
  const SourceTensor* first = nullptr;
  for (const SourceTensor& t : source.tensors()) {
    bool harmless = ends_with(t.name, "rotary_emb.inv_freq") ||
                    (spec_.tie_word_embeddings && (t.name == "lm_head.weight" || t.name == "output.weight"));
    CONVEYOR_CHECK(expected.count(t.name) || harmless, "checkpoint '", source.path(), "' holds tensor '", t.name,
                   "' that a ", architecture_name(spec_.architecture),
                   " model does not use; refusing to ignore it (is the config for another architecture?)");
    // KV cache scales are fp32 scalars beside weights of any dtype (find_kv_scales checked them).
    if (source.format() != SourceFormat::kSafetensors || harmless || is_kv_scale_name(t.name) ||
        spec_.quant.checkpoint != CheckpointQuant::kNone)
      continue;
    if (!first) first = &t;
    CONVEYOR_CHECK(t.dtype == first->dtype, "checkpoint '", source.path(), "': tensor '", t.name, "' is ",
                   t.dtype, " but '", first->name, "' is ", first->dtype,
                   "; conveyor expects one dtype for all weights — re-save the checkpoint in one dtype");
  }
}

int64_t WeightLoader::source_row(const WeightId& id, int64_t row) const {
  if (!unpermute_qk_ || (id.kind != WeightKind::kQ && id.kind != WeightKind::kK)) return row;
  // llama.cpp stores each head's rows as interleaved (even, odd) rotary pairs; HF as two halves.
  int64_t hd = spec_.head_dim, half = hd / 2;
  int64_t head = row / hd, w = row % hd;
  int64_t j = w / half, i = w % half;
  return head * hd + 2 * i + j;
}

void WeightLoader::read(const WeightId& id, const HostTensor& t, float* out) const {
  read_values(id, t, out);
  if (!check_finite_) return;
  int64_t bad = count_non_finite(out, t.numel());
  if (bad == 0) return;
  const std::string name = source_name(id);
  CONVEYOR_THROW("tensor '", name, "' in '", source_->at(name).file, "' has ", bad, " non-finite value(s) (NaN or Inf) in the ",
                 t.numel(), " elements this rank loads; the file is corrupt. Download it again (set "
                 "model.check_finite=false only to load it anyway)");
}

void WeightLoader::read_values(const WeightId& id, const HostTensor& t, float* out) const {
  const std::string name = source_name(id);
  if (t.full_shape.size() == 1) {  // norms and biases: one element range
    int64_t b = t.split_begin;
    source_->read_range(name, b, b + t.shape[0], out);
    return;
  }
  int64_t cols = t.full_shape[1];
  int64_t rows = t.shape[0], width = t.shape[1];
  int64_t row0 = t.split_dim == 0 ? t.split_begin : 0;
  int64_t col0 = t.split_dim == 1 ? t.split_begin : 0;
  const bool blocks = spec_.quant.checkpoint == CheckpointQuant::kFp8Block && is_quantized_linear(id.kind);
  parallel_for(rows, [&](int64_t r) {
    int64_t src = source_row(id, row0 + r);
    source_->read_range(name, src * cols + col0, src * cols + col0 + width, out + r * width);
    if (blocks) apply_block_scales(spec_, *source_, id, src, col0, width, out + r * width);
  });
}

HostTensor WeightLoader::load(const WeightId& id, const WeightShare& share) const {
  HostTensor t = make_share_header(spec_, id, share);
  t.data.resize(static_cast<size_t>(t.numel()));
  read(id, t, t.data.data());
  return t;
}

WeightSet WeightLoader::load_share(const WeightShare& share) const {
  // One copy of the loader shared by every fill: the set may outlive this object.
  auto self = std::make_shared<const WeightLoader>(*this);
  WeightSet set;
  for (const WeightId& id : share_weights(spec_, share)) {
    set.add(make_share_header(spec_, id, share),
            [self, id](const HostTensor& t, float* out) { self->read(id, t, out); });
  }
  add_fp8_scale_entries(set, spec_, share, source_);
  add_kv_scale_entries(set, kv_scales_, share, source_);
  return set;
}

WeightSet open_share(const ModelSpec& spec, const WeightShare& share, const WeightOrigin& origin) {
  if (origin.dummy) return make_dummy_weights(spec, share, origin.seed);
  CONVEYOR_CHECK(!origin.path.empty(), "model.path is empty: give a model directory or .gguf file (--model), or use "
                 "--load-format dummy with --model-config");
  WeightLoader loader(spec, open_weight_source(origin.path));
  loader.set_check_finite(origin.check_finite);
  return loader.load_share(share);  // lazy: the set owns the source
}

}  // namespace conveyor
