// CudaStageSampler (see cuda_stage_sampler.h). SamplingParams map to SamplingRowParams as the
// sampler's GPU test maps them (greedy -> temperature 0); the history of a row is its prompt ids then
// its outputs, and stop_token_ids are the ids masked while min_tokens is not reached.
#include "stages/cuda/cuda_stage_sampler.h"

#include <algorithm>
#include <vector>

#include "kernels/cuda/sampling.h"
#include "runtime/core/cuda_buffer.h"
#include "runtime/core/error.h"

namespace conveyor {
namespace {


SampleResult to_result(const SampledToken& t, const SamplingParams& p) {
  SampleResult r;
  r.token = t.token;
  if (!p.logprobs) return r;
  r.has_logprobs = true;
  r.logprob = t.logprob;
  r.rank = t.rank;
  for (int i = 0; i < t.num_top && i < kMaxSampledLogprobs; ++i) r.top.push_back(TokenLogprob{t.top_ids[i], t.top_logprobs[i]});
  return r;
}

class CudaStageSampler final : public StageSampler {
 public:
  // The workspace and the sampler are made here, at start-up: a step only reuses them.
  CudaStageSampler(void* stream, int64_t vocab, int max_rows)
      : stream_(static_cast<cudaStream_t>(stream)),
        vocab_(vocab),
        max_rows_(std::max(1, max_rows)),
        workspace_(cuda_sampler_workspace_bytes(vocab, max_rows_), "the sampler's workspace"),
        sampler_(vocab, max_rows_, {}, workspace_.data(), workspace_.bytes()) {}

  void apply(const StepPlan& plan) override {
    state_.apply(plan);
    if (state_.eos_ids() != sampler_.eos_ids()) sampler_.set_eos_ids(state_.eos_ids());
  }

  StepResult sample(const StepPlan& plan, const TensorView& logits) override {
    std::vector<PlanSampler::SeqState*> rows;
    for (const SeqChunk& c : plan.seqs)
      if (c.wants_logits) rows.push_back(&state_.state(plan, c));
    const int64_t n = static_cast<int64_t>(rows.size());
    CONVEYOR_CHECK(n == 0 || (logits.dtype == DType::kF32 && logits.rows == n && logits.cols == vocab_), "step ",
                   plan.step, ": logits are [", logits.rows, ", ", logits.cols, "] ", dtype_name(logits.dtype),
                   ", expected [", n, ", ", vocab_, "] f32");
    StepResult result;
    result.step = plan.step;
    for (int64_t first = 0; first < n; first += max_rows_) {
      const int count = static_cast<int>(std::min<int64_t>(max_rows_, n - first));
      sample_rows(logits.f32() + first * vocab_, rows.data() + first, count, &result);
    }
    return result;
  }

 private:
  void sample_rows(const float* logits, PlanSampler::SeqState* const* rows, int count, StepResult* result) {
    std::vector<SamplingRowParams> params;
    std::vector<int64_t> hist_off{0}, mask_off{0};
    std::vector<int32_t> hist, num_out, mask;
    for (int r = 0; r < count; ++r) {
      const PlanSampler::SeqState& s = *rows[r];
      params.push_back(sampling_row_params(s.params, s.seed, s.output_ids.size()));
      hist.insert(hist.end(), s.prompt_ids.begin(), s.prompt_ids.end());
      hist.insert(hist.end(), s.output_ids.begin(), s.output_ids.end());
      hist_off.push_back(static_cast<int64_t>(hist.size()));
      num_out.push_back(static_cast<int32_t>(s.output_ids.size()));
      mask.insert(mask.end(), s.params.stop_token_ids.begin(), s.params.stop_token_ids.end());
      mask_off.push_back(static_cast<int64_t>(mask.size()));
    }
    const std::vector<SampledToken> got =
        sampler_.sample(logits, count, params, hist_off, hist, num_out, mask_off, mask, stream_);
    CONVEYOR_CHECK(static_cast<int>(got.size()) == count, "internal: CudaSampler returned ", got.size(), " of ",
                   count, " rows");
    for (int r = 0; r < count; ++r) {
      result->samples.push_back(to_result(got[static_cast<size_t>(r)], rows[r]->params));
      rows[r]->output_ids.push_back(got[static_cast<size_t>(r)].token);
    }
  }

  cudaStream_t stream_;
  int64_t vocab_;
  int max_rows_;
  PlanSampler state_;
  CudaBuffer workspace_;  // before sampler_: outlives it
  CudaSampler sampler_;
};

}  // namespace

SamplingRowParams sampling_row_params(const SamplingParams& p, uint64_t seed, size_t num_outputs) {
  SamplingRowParams r;
  r.temperature = p.greedy() ? 0.f : static_cast<float>(p.temperature);
  r.top_k = static_cast<int32_t>(p.top_k);
  r.top_p = p.top_p;
  r.min_p = p.min_p;
  r.repetition_penalty = static_cast<float>(p.repetition_penalty);
  r.presence_penalty = static_cast<float>(p.presence_penalty);
  r.frequency_penalty = static_cast<float>(p.frequency_penalty);
  r.seed = seed;
  r.step = num_outputs;
  r.min_tokens_active = static_cast<int64_t>(num_outputs) < p.min_tokens ? 1 : 0;
  r.ignore_eos = p.ignore_eos ? 1 : 0;
  r.num_logprobs = p.logprobs ? static_cast<int32_t>(*p.logprobs) : -1;
  return r;
}

std::unique_ptr<StageSampler> make_cuda_stage_sampler(void* stream, int64_t vocab, int max_rows) {
  return std::make_unique<CudaStageSampler>(stream, vocab, max_rows);
}

}  // namespace conveyor
