// StageModel (see stage_model.h). The plan is turned into backend metadata once per step; the layers
// then run back to back over one residual tensor.
#include "stages/stage_model.h"

#include <algorithm>
#include <utility>

#include "kernels/gemm_tuning.h"
#include "runtime/core/error.h"
#include "runtime/model/weights_kv_scales.h"

namespace conveyor {
namespace {

// The checkpoint's per-tensor K/V scales of the stage's layers, taken whatever the cache holds (a
// checkpoint with them loads with any KV dtype); an FP8 cache uses them. Returns the layers that had them.
int take_kv_scales(WeightBank& bank, KvCache& cache, const WeightShare& share) {
  int scaled = 0;
  for (int64_t l = share.first_layer; l < share.last_layer; ++l) {
    const std::string k = kv_scale_entry(l, KvScaleKind::kK), v = kv_scale_entry(l, KvScaleKind::kV);
    if (!bank.has(k) && !bank.has(v)) continue;
    const KvScales scales{bank.take_scalar(k), bank.take_scalar(v)};
    if (cache.fp8()) cache.set_scales(static_cast<int>(l), scales);
    ++scaled;
  }
  return scaled;
}

}  // namespace

BatchInfo make_batch_info(const StepPlan& plan, int block_size, bool with_token_ids) {
  BatchInfo b;
  b.query_start.push_back(0);
  for (const SeqChunk& s : plan.seqs) b.max_blocks = std::max<int>(b.max_blocks, static_cast<int>(s.block_table.size()));
  for (const SeqChunk& s : plan.seqs) {
    const int n = static_cast<int>(s.tokens.size());
    CONVEYOR_CHECK(n > 0, "step ", plan.step, ": sequence ", s.seq_id, " has no new tokens");
    CONVEYOR_CHECK(s.start_pos >= 0, "step ", plan.step, ": sequence ", s.seq_id, " starts at position ", s.start_pos);
    const int64_t needed = (static_cast<int64_t>(s.start_pos) + n + block_size - 1) / block_size;
    CONVEYOR_CHECK(static_cast<int64_t>(s.block_table.size()) >= needed, "step ", plan.step, ": sequence ", s.seq_id,
                   " covers positions [0, ", s.start_pos + n, ") but its block table has ", s.block_table.size(),
                   " blocks of ", block_size, " (needs ", needed, ")");
    for (int i = 0; i < n; ++i) b.positions.push_back(s.start_pos + i);
    if (with_token_ids) b.token_ids.insert(b.token_ids.end(), s.tokens.begin(), s.tokens.end());
    b.block_tables.insert(b.block_tables.end(), s.block_table.begin(), s.block_table.end());
    b.block_tables.resize(b.block_tables.size() + (b.max_blocks - s.block_table.size()), -1);
    b.rope_seq_len.push_back(s.start_pos + n);
    if (s.wants_logits) b.logit_rows.push_back(b.query_start.back() + n - 1);
    b.query_start.push_back(b.query_start.back() + n);
  }
  // Scored prompt rows follow the sampled ones, so a sampler sees exactly the rows it always saw.
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const ChunkScoring& c = plan.seqs[i].score;
    CONVEYOR_CHECK(c.rows == 0 || (c.first_row >= 0 && c.first_row + c.rows <= static_cast<int>(plan.seqs[i].tokens.size())),
                   "step ", plan.step, ": sequence ", plan.seqs[i].seq_id, " scores rows [", c.first_row, ", ",
                   c.first_row + c.rows, ") of a chunk of ", plan.seqs[i].tokens.size());
    for (int r = 0; r < c.rows; ++r) b.logit_rows.push_back(b.query_start[i] + c.first_row + r);
  }
  return b;
}

StageModel::StageModel(const ModelSpec& spec, const WeightShare& share, WeightSet&& weights, Ops& ops,
                       KvCache& cache, Communicator* tp)
    : traits_(model_traits(spec, share.tp_size)), share_(share), ops_(ops), cache_(cache), tp_(tp) {
  CONVEYOR_CHECK(share.final_norm == share.lm_head, "stage ", share.describe(),
                 ": the final norm and the LM head must be on the same (last) stage");
  CONVEYOR_CHECK(cache.first_layer() == share.first_layer && cache.num_layers() == share.last_layer - share.first_layer,
                 "stage ", share.describe(), ": its KV cache holds layers [", cache.first_layer(), ", ",
                 cache.first_layer() + cache.num_layers(), ")");
  CONVEYOR_CHECK(tp == nullptr || tp->size() == share.tp_size, "stage ", share.describe(), ": the TP communicator has ",
                 tp ? tp->size() : 1, " ranks");
  WeightBank bank(std::move(weights), ops, spec.quant.fp8_linears());
  if (share.embedding) {
    const int vocab_start = static_cast<int>(bank.peek("embed_tokens").split_begin);
    embedding_ = VocabParallelEmbedding(bank.take("embed_tokens"), traits_.vocab, vocab_start, tp);
  }
  layers_.reserve(static_cast<size_t>(share.last_layer - share.first_layer));
  for (int64_t l = share.first_layer; l < share.last_layer; ++l)
    layers_.emplace_back(traits_, static_cast<int>(l), bank, tp);
  if (share.lm_head) {
    final_norm_ = bank.take("final_norm");
    lm_head_ = ParallelLmHead(bank.take("lm_head"), traits_.vocab, tp);
  }
  kv_scaled_layers_ = take_kv_scales(bank, cache, share);
  bank.finish();
}

KvLayerView StageModel::kv_view(int layer) const {
  KvLayerView v{cache_.k_data(layer), cache_.v_data(layer), cache_.shape(), cache_.dtype(), cache_.scales(layer)};
  if (kv_scales_pending_) v.calibrate = &calculated_.at(static_cast<size_t>(layer - cache_.first_layer()));
  return v;
}

int64_t StageModel::warm_up_gemms(int64_t max_tokens, int64_t max_logit_rows) {
  if (!ops_.tunes_on_first_use()) return 0;
  int64_t calls = 0;
  // Largest first, as a run's first (prefill) step comes: the activation pool carves the large blocks
  // once and the smaller row counts reuse them (its best fit), instead of carving every size in turn.
  auto largest_first = [](int64_t max_rows) {
    std::vector<int64_t> rows = gemm_warmup_rows(max_rows);
    std::reverse(rows.begin(), rows.end());
    return rows;
  };
  if (!layers_.empty()) {
    for (int64_t rows : largest_first(max_tokens)) {
      layers_.front().warm_up(ops_, rows);
      calls += DecoderLayer::kGemms;
    }
  }
  if (is_last()) {
    for (int64_t rows : largest_first(std::min(max_logit_rows, max_tokens))) {
      lm_head_.warm_up(ops_, rows);
      ++calls;
    }
  }
  return calls;
}

Tensor StageModel::run(const StepPlan& plan, const Tensor& input, Tensor* logits) {
  step_ = plan.step;
  run_begin_s_ = stamps_ ? stamps_->now() : 0;
  BatchInfo b = make_batch_info(plan, cache_.shape().block_size, is_first());
  const bool tp_capturable = tp_ == nullptr || tp_->capturable();
  // A step that calculates KV scales runs eagerly: the attention reads K and V back to the host.
  if (!kv_scales_pending_ && graphs_on_ && tp_capturable && ops_.supports_graphs() && DecodeGraphs::is_pure_decode(plan) &&
      plan.num_score_rows() == 0 && ops_.graph_safe(b)) {
    const int bucket = DecodeGraphs::bucket_for(b.num_seqs());
    if (bucket > 0) return run_decode_graph(b, bucket, input, logits);
  }
  ops_.set_batch(b);
  stamp_metadata();
  Tensor hidden = forward_layers(input, logits);
  if (kv_scales_pending_) {  // each layer's attention calculated its scales before storing K and V
    kv_scales_pending_ = false;
    for (int i = 0; i < cache_.num_layers(); ++i)
      cache_.set_scales(cache_.first_layer() + i, calculated_[static_cast<size_t>(i)]);
  }
  return hidden;
}

Tensor StageModel::forward_layers(const Tensor& input, Tensor* logits) {
  const int64_t tokens = ops_.batch().num_tokens();
  Tensor hidden;
  if (is_first()) {
    hidden = embedding_.forward(ops_);
  } else {
    CONVEYOR_CHECK(input.rows() == tokens && input.cols() == traits_.hidden, "stage ", share_.describe(),
                   ": received hidden states [", input.rows(), ", ", input.cols(), "] for a step of ", tokens,
                   " tokens x ", traits_.hidden);
    hidden = input;
  }
  for (const DecoderLayer& layer : layers_) layer.forward(ops_, hidden.view(), kv_view(layer.index()));
  if (is_last()) {
    CONVEYOR_CHECK(logits != nullptr, "stage ", share_.describe(), ": the last stage needs a logits output");
    Tensor rows = ops_.empty(static_cast<int64_t>(ops_.batch().logit_rows.size()), traits_.hidden);
    if (rows.rows() > 0) {
      ops_.gather_logit_rows(rows.view(), hidden.view());
      ops_.rms_norm(rows.view(), rows.view(), final_norm_.view(), traits_.rms_norm_eps);
      *logits = lm_head_.forward(ops_, rows.view());
    } else {
      *logits = Tensor();
    }
  }
  return hidden;
}

// A decode step through the graph of its (bucket, stride): metadata to the layout's fixed buffer,
// the input hidden states into the graph's input rows, then one launch. The real rows come first.
Tensor StageModel::run_decode_graph(const BatchInfo& b, int bucket, const Tensor& input, Tensor* logits) {
  const int n = b.num_tokens();
  const int64_t n_logits = static_cast<int64_t>(b.logit_rows.size());
  const int stride = DecodeGraphs::stride_for(b.max_blocks);
  CONVEYOR_CHECK(is_first() || (input.rows() == n && input.cols() == traits_.hidden), "stage ", share_.describe(),
                 ": received hidden states [", input.rows(), ", ", input.cols(), "] for a step of ", n, " tokens x ",
                 traits_.hidden);
  CONVEYOR_CHECK(!is_last() || logits != nullptr, "stage ", share_.describe(), ": the last stage needs a logits output");
  ops_.set_batch_fixed(DecodeGraphs::pad(b, bucket, stride));
  stamp_metadata();
  DecodeGraphs::Entry* e = graphs_.find(bucket, stride);
  Tensor padded_input;
  if (!is_first()) {
    padded_input = e ? e->input : ops_.empty(bucket, traits_.hidden);
    ops_.copy_cols(padded_input.view().row_slice(0, n), 0, input.view(), 0, traits_.hidden);
  }
  if (!e && !graphs_.warmed(bucket)) {
    // First step of this bucket: eager, so GEMMs autotune for it and pools and workspaces exist.
    graphs_.mark_warmed(bucket);
    Tensor full_logits;
    Tensor hidden = forward_layers(padded_input, is_last() ? &full_logits : nullptr);
    if (is_last()) *logits = full_logits.first_rows(n_logits);
    return hidden.first_rows(n);
  }
  if (!e) {
    DecodeGraphs::Entry& ne = graphs_.add(bucket, stride);
    ne.input = padded_input;
    try {
      ne.graph = ops_.capture([&] { ne.hidden = forward_layers(ne.input, is_last() ? &ne.logits : nullptr); });
    } catch (...) {
      graphs_.erase(bucket, stride);
      throw;
    }
    e = &ne;
  }
  e->graph->replay();
  if (is_last()) *logits = e->logits.first_rows(n_logits);
  return e->hidden.first_rows(n);
}

Tensor StageModel::forward(const StepPlan& plan, const Tensor& input, std::vector<float>* logits) {
  Tensor device_logits;
  Tensor hidden = run(plan, input, is_last() ? &device_logits : nullptr);
  if (is_last()) {
    CONVEYOR_CHECK(logits != nullptr, "stage ", share_.describe(), ": the last stage needs a logits output");
    logits->assign(static_cast<size_t>(device_logits.view().numel()), 0.f);
    if (!device_logits.empty()) ops_.download(device_logits.view(), logits->data());
  }
  return hidden;
}

}  // namespace conveyor
