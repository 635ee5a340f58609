// Batch sampler on device logits that picks the SAME tokens as the CPU reference Sampler::sample
// (runtime/sampling/sampler.h): penalties -> min_tokens mask -> temperature -> top-k -> top-p -> min-p ->
// Gumbel-max with the counter-based hash, and raw logprobs. Only parameters and small results cross
// the bus; the logits stay on the device. Every float/double operation mirrors the CPU's, in the same
// order, so that only summation order (sums of probabilities in double) can differ.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace conveyor {

// One logits row's parameters (host struct; copied to the device by sample()). Types follow the CPU
// sampler's arithmetic: it rounds temperature and penalties to float but compares top_p and min_p in
// double, so those two stay double here.
struct SamplingRowParams {
  float temperature = 1.f;       // 0 for greedy rows: the caller maps SamplingParams::greedy() to 0
  int32_t top_k = 0;             // <= 0 or >= vocab: off
  double top_p = 1.0;            // >= 1: off
  double min_p = 0.0;            // <= 0: off
  float repetition_penalty = 1.f;
  float presence_penalty = 0.f;
  float frequency_penalty = 0.f;
  uint64_t seed = 0;             // request_seed(...)
  uint64_t step = 0;             // number of output tokens so far
  int32_t min_tokens_active = 0; // 1 when outputs < min_tokens: EOS (unless ignore_eos) and mask ids -inf
  int32_t ignore_eos = 0;        // 1: EOS is not masked by min_tokens
  int32_t num_logprobs = -1;     // -1: none; else 0..kMaxSampledLogprobs alternatives
};

constexpr int kMaxSampledLogprobs = 20;

struct SampledToken {
  int32_t token;
  float logprob;  // raw logprob of token (when num_logprobs >= 0)
  int64_t rank;   // 1 + number of tokens with a strictly larger raw logit
  int32_t num_top;
  int32_t top_ids[kMaxSampledLogprobs];  // descending raw logprob, lower id first on ties
  float top_logprobs[kMaxSampledLogprobs];
};

// The counter-based noise on the device, for tests: out_uniform[i] = sampling_uniform(seed[i],
// step[i], token[i]) and out_gumbel[i] = sampling_gumbel(...), computed as the sampler's kernels do.
// All pointers are device arrays of n elements. Enqueue only.
void sampling_noise_cuda(const uint64_t* seed, const uint64_t* step, const uint64_t* token, int64_t n,
                         double* out_uniform, double* out_gumbel, cudaStream_t stream);

// Device bytes a CudaSampler of `vocab` x `max_rows` works in (processed logits, sort keys and ids,
// CUB's scratch, per-row parameters and results, one chunk of penalty entries). Sized at start-up by
// the caller, who allocates it once and passes it to the constructor.
size_t cuda_sampler_workspace_bytes(int64_t vocab, int max_rows);

class CudaSampler {
 public:
  // Carves `workspace` (device memory of at least cuda_sampler_workspace_bytes(vocab, max_rows),
  // owned by the caller and outliving the sampler) into its buffers and allocates the pinned result
  // space; sample() allocates nothing. eos_ids: the model's EOS tokens.
  CudaSampler(int64_t vocab, int max_rows, std::vector<int32_t> eos_ids, void* workspace, size_t workspace_bytes);
  ~CudaSampler();
  CudaSampler(const CudaSampler&) = delete;
  CudaSampler& operator=(const CudaSampler&) = delete;

  // The EOS tokens masked while min_tokens is not reached (checked against the vocabulary).
  void set_eos_ids(std::vector<int32_t> eos_ids);
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }

  // logits: device fp32 [rows, vocab]; read only (the processed copy lives in the workspace).
  // hist_offsets [rows + 1] into hist_ids: per row the prompt then output ids (host CSR); the last
  // num_output[r] of a row's range are its outputs. mask_offsets [rows + 1] into mask_ids: per row
  // the stop_token_ids masked while min_tokens_active (host CSR). Returns one SampledToken per row;
  // synchronizes `stream` once. Throws conveyor::Error on bad ids, non-finite logits, or a row whose
  // every token was removed, like the CPU sampler.
  std::vector<SampledToken> sample(const float* logits, int rows, const std::vector<SamplingRowParams>& params,
                                   const std::vector<int64_t>& hist_offsets, const std::vector<int32_t>& hist_ids,
                                   const std::vector<int32_t>& num_output, const std::vector<int64_t>& mask_offsets,
                                   const std::vector<int32_t>& mask_ids, cudaStream_t stream);

  // One (row, token) whose logit the penalties or the min_tokens mask change; flags are kPenalty* in
  // sampling.cu. Public only so that the kernels can read it.
  struct Penalty {
    int32_t row;
    int32_t token;
    int32_t count;  // occurrences among the row's outputs (frequency penalty)
    int32_t flags;
  };

  int64_t vocab() const { return vocab_; }
  int max_rows() const { return max_rows_; }

 private:
  struct Layout;  // how the workspace is split (sampling.cu)
  friend size_t cuda_sampler_workspace_bytes(int64_t vocab, int max_rows);
  // Only for cuda_sampler_workspace_bytes: the shape and CUB's scratch size, no memory.
  CudaSampler(int64_t vocab, int max_rows);

  std::vector<Penalty> build_penalties(int rows, const std::vector<SamplingRowParams>& params,
                                       const std::vector<int64_t>& hist_offsets, const std::vector<int32_t>& hist_ids,
                                       const std::vector<int32_t>& num_output, const std::vector<int64_t>& mask_offsets,
                                       const std::vector<int32_t>& mask_ids) const;
  // Marks (and uploads) the direct rows: greedy with no penalty entry, so the logits are their scores as they are
  // (prepare_kernel skips them; select_kernel reads the logits). Returns how many rows are direct.
  int mark_direct(int rows, const std::vector<SamplingRowParams>& params, const std::vector<Penalty>& entries,
                   cudaStream_t stream);
  // Enqueues the penalty kernel over `entries`, a chunk of the workspace's capacity at a time.
  void apply_penalties(const float* logits, const std::vector<Penalty>& entries, cudaStream_t stream);
  // Enqueues the per-row sort of the rows that use top-k or top-p; returns {keys, ids} sorted
  // descending (either workspace buffer, as CUB leaves them), or {nullptr, nullptr} when no row does.
  std::pair<const uint32_t*, const int32_t*> sort_rows(int rows, const std::vector<SamplingRowParams>& params,
                                                      cudaStream_t stream);

  int64_t vocab_;
  int max_rows_;
  std::vector<int32_t> eos_ids_;
  float* work_ = nullptr;             // [max_rows, vocab] processed logits
  uint32_t* keys_[2] = {};            // [max_rows, vocab] x2: order-preserving keys of work_ (CUB ping-pong)
  int32_t* ids_[2] = {};              // [max_rows, vocab] x2: token ids travelling with the keys
  void* sort_temp_ = nullptr;
  size_t sort_temp_bytes_ = 0;
  int* seg_begin_ = nullptr;          // [max_rows]; begin == end for rows that need no sort
  int* seg_end_ = nullptr;            // [max_rows]
  std::vector<int> h_seg_begin_, h_seg_end_;
  SamplingRowParams* d_params_ = nullptr;  // [max_rows]
  int* d_bad_token_ = nullptr;        // [max_rows] lowest id of a NaN/+inf logit, or INT_MAX
  int* d_direct_ = nullptr;           // [max_rows] 1 where the row is direct (mark_direct)
  std::vector<int> h_direct_;
  Penalty* d_penalties_ = nullptr;    // [kPenaltyChunk]: entries are independent, so chunks are exact
  SampledToken* d_out_ = nullptr;     // [max_rows]
  SampledToken* h_out_ = nullptr;     // [max_rows] pinned
  int* h_bad_token_ = nullptr;        // [max_rows] pinned
};

}  // namespace conveyor
