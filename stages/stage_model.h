// StageModel: the slice of a model one pipeline stage runs on one TP rank: layers [first, last),
// plus the embedding on the first stage and the final norm + LM head on the last. Between stages the
// only activation is the hidden state [num_tokens, hidden] of the step's tokens in plan order, so
// the pipeline sends exactly that, with the plan, and nothing else.
#pragma once

#include <string>
#include <vector>

#include "runtime/core/step_stamps.h"
#include "runtime/dist/communicator.h"
#include "runtime/engine/step_plan.h"
#include "runtime/model/weight_loader.h"
#include "stages/decode_graphs.h"
#include "stages/decoder_layer.h"
#include "stages/kv_cache.h"

namespace conveyor {

// The backend's view of a plan: tokens flattened in plan order, per-sequence query offsets, block
// tables padded to the longest, logit rows of the sequences that want them. Throws on a malformed
// plan (a sequence without tokens, a block table too short for its positions).
BatchInfo make_batch_info(const StepPlan& plan, int block_size, bool with_token_ids);

class StageModel {
 public:
  // weights: exactly the share's tensors (WeightLoader::load_share or make_dummy_weights); cache holds
  // the share's layers. ops, cache and tp (nullptr when tp = 1) must outlive the stage.
  StageModel(const ModelSpec& spec, const WeightShare& share, WeightSet&& weights, Ops& ops, KvCache& cache,
             Communicator* tp);

  bool is_first() const { return share_.embedding; }
  bool is_last() const { return share_.lm_head; }
  const WeightShare& share() const { return share_; }

  // One step over this stage. input: the previous stage's hidden states, updated in place (ignored
  // and may be empty on the first stage). Returns the hidden states after the stage's layers; on the
  // last stage also sets logits to [plan.num_logits() + plan.num_score_rows(), vocab] (fp32, backend
  // memory: the sampled rows in plan order, then the scored prompt rows in plan order; an empty
  // tensor when there are none), else leaves them untouched.
  Tensor run(const StepPlan& plan, const Tensor& input, Tensor* logits);
  // runtime.gemm_warmup: when the backend times a GEMM shape's first use (Ops::tunes_on_first_use), runs
  // each of the stage's GEMM shapes once at every row count of gemm_warmup_rows (kernels/gemm_tuning.h):
  // the layers' up to max_tokens rows, the LM head's up to min(max_logit_rows, max_tokens), on scratch
  // activations (no norm, attention, collective or cache write: the model's state is untouched), so the
  // run's steps find every shape timed. One layer speaks for all: a stage's layers share their shapes.
  // Returns the GEMM calls made (0 when the backend does not tune).
  int64_t warm_up_gemms(int64_t max_tokens, int64_t max_logit_rows);
  // run() with the logits copied to the host (tests and the CPU runner).
  Tensor forward(const StepPlan& plan, const Tensor& input, std::vector<float>* logits);

  // Decode steps replay CUDA graphs (decode_graphs.h) when on (the default), the backend supports
  // them and the TP transport can be captured (tp = 1, or NCCL: every TP rank sees the same plans, so
  // all capture and replay the same steps; the host-staged transport waits on the host and cannot);
  // prefill and mixed steps always run eagerly. Tensors run() returns from a graph are views of the graph's own
  // buffers: valid until the next step of this stage (consumers are ordered on the ops' stream).
  void set_graphs(bool on) { graphs_on_ = on; }
  // Stamps each run's "metadata" span (the step's BatchInfo built and handed to the ops, which upload
  // it) for `conveyor bench --step-timeline`; not owned, null: none.
  void set_step_stamps(StepStamps* stamps) { stamps_ = stamps; }
  // With stamps: the device mark (Ops::mark) the last run() recorded once its metadata was handed over.
  int64_t metadata_mark() const { return metadata_mark_; }
  size_t num_graphs() const { return graphs_.size(); }
  // cache.calculate_kv_scales (an FP8 cache only): the next run() takes every layer's scales from its own
  // K and V (kv_scales_from_amax), eagerly, and the cache keeps them for every later step.
  void calculate_kv_scales() {
    kv_scales_requested_ = true;
    kv_scales_pending_ = cache_.fp8();
    calculated_.assign(static_cast<size_t>(cache_.num_layers()), KvScales{});
  }
  // Whether a run() has calculated the scales (then the cache's scales are they).
  bool kv_scales_calculated() const { return kv_scales_requested_ && cache_.fp8() && !kv_scales_pending_; }
  // The start-up line on the stage's KV cache and where its scales come from (describe_kv_cache).
  std::string kv_cache_line() const { return describe_kv_cache(cache_, kv_scaled_layers_, kv_scales_requested_); }

 private:
  KvLayerView kv_view(int layer) const;
  // The stage's layers (and head) over the batch of the last set_batch.
  Tensor forward_layers(const Tensor& input, Tensor* logits);
  Tensor run_decode_graph(const BatchInfo& b, int bucket, const Tensor& input, Tensor* logits);

  ModelTraits traits_;
  WeightShare share_;
  Ops& ops_;
  KvCache& cache_;
  VocabParallelEmbedding embedding_;
  std::vector<DecoderLayer> layers_;
  Tensor final_norm_;
  ParallelLmHead lm_head_;
  Communicator* tp_ = nullptr;
  bool graphs_on_ = true;
  StepStamps* stamps_ = nullptr;
  int64_t step_ = 0;       // the running plan's step (stamps)
  double run_begin_s_ = 0;  // when run() began (stamps)
  int64_t metadata_mark_ = -1;  // the device mark after the step's metadata (stamps)
  void stamp_metadata() {
    if (!stamps_) return;
    stamps_->add(step_, "metadata", run_begin_s_, stamps_->now());
    metadata_mark_ = ops_.mark(ops_.stream());
  }
  DecodeGraphs graphs_;
  int kv_scaled_layers_ = 0;  // layers whose K/V scales came from the checkpoint
  bool kv_scales_requested_ = false, kv_scales_pending_ = false;
  mutable std::vector<KvScales> calculated_;  // per layer, filled by the attention of a pending run
};

}  // namespace conveyor
