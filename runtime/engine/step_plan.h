// StepPlan: what one forward step computes, decided by the leader's scheduler. It lists, per sequence,
// the new tokens (a prefill chunk or one decode token), where they start in the sequence and the KV
// blocks that hold it. The plan travels down the pipeline with the activations (encode()/decode());
// no rank other than the leader makes scheduling decisions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/sampling/params.h"
#include "runtime/sampling/prompt_scores.h"
#include "runtime/sampling/sampler.h"

namespace conveyor {

// Prompt positions of a chunk whose logits the sampling stage scores (prompt_logprobs, perplexity):
// rows [first_row, first_row + rows) of the chunk; row r is scored against the token after it,
// tokens[r + 1], or next_token for the chunk's last row (the first token of the next chunk).
struct ChunkScoring {
  int32_t first_row = 0;
  int32_t rows = 0;                    // 0: nothing scored
  int32_t next_token = -1;
  int32_t top = 0;                     // alternatives per position, 0..kMaxLogprobs
  bool full = false;                   // also the whole log-softmax of each row
};

struct SeqChunk {
  int64_t seq_id = 0;
  int32_t start_pos = 0;               // tokens of this sequence already in the KV cache
  std::vector<int32_t> tokens;         // new tokens: positions [start_pos, start_pos + tokens.size())
  std::vector<int32_t> block_table;    // KV blocks covering positions [0, start_pos + tokens.size())
  bool wants_logits = false;           // produce logits at the last new position (sample a token)
  ChunkScoring score;
};

// What the sampling stage (the last) must know of a sequence, sent once with the first plan that
// schedules it. Prompt ids travel only when a repetition penalty needs them.
struct NewSequence {
  int64_t seq_id = 0;
  uint64_t seed = 0;
  SamplingParams params;               // only the fields the sampler reads travel
  std::vector<int32_t> prompt_ids;
};

struct StepPlan {
  int64_t step = 0;
  bool shutdown = false;               // no work: the receiving stage forwards it and stops
  std::vector<SeqChunk> seqs;
  std::vector<NewSequence> new_seqs;   // sequences scheduled for the first time
  std::vector<int64_t> retired;        // sequences the leader finished since its previous plan
  std::vector<int32_t> eos_ids;        // the model's EOS ids; set on the first plan only

  size_t num_tokens() const {
    size_t n = 0;
    for (const auto& s : seqs) n += s.tokens.size();
    return n;
  }
  // Rows the sampler reads: one per chunk with wants_logits.
  size_t num_logits() const {
    size_t n = 0;
    for (const auto& s : seqs) n += s.wants_logits ? 1 : 0;
    return n;
  }
  // Rows scored for prompt positions; the last stage computes them after the sampled rows.
  size_t num_score_rows() const {
    size_t n = 0;
    for (const auto& s : seqs) n += static_cast<size_t>(s.score.rows);
    return n;
  }

  // Flat int64 encoding that travels down the pipeline ahead of the hidden states (one send of the
  // length, one of the words). decode() checks every count against the words left and throws a
  // conveyor::Error naming the field on a malformed buffer.
  std::vector<int64_t> encode() const;
  static StepPlan decode(const std::vector<int64_t>& words);
};

// What the sampling stage returns to the leader for one plan: one result per chunk with
// wants_logits, in plan order, and one PromptScores per chunk with score rows, in plan order. Same
// flat encoding rules as StepPlan (full log-softmax rows travel as two floats per word).
struct StepResult {
  int64_t step = 0;
  std::vector<SampleResult> samples;
  std::vector<PromptScores> scores;

  std::vector<int64_t> encode() const;
  static StepResult decode(const std::vector<int64_t>& words);
};

}  // namespace conveyor
