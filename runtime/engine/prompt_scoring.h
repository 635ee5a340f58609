// Prompt scoring: which prompt positions of a request the last stage scores (prompt_logprobs of
// a batch request; every position of a perplexity chunk) and how. A position p's logits predict
// prompt token p + 1, so a request wanting the logprobs of prompt tokens [first, n) has positions
// [first - 1, n - 1) scored; the last prompt position samples and is never scored.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/engine/step_plan.h"

namespace conveyor {

struct PromptScoring {
  bool on = false;
  int32_t top = 0;     // alternatives per position beside the prompt's token, 0..kMaxLogprobs
  bool full = false;   // also the whole log-softmax of every scored position (perplexity's KLD)
  int32_t first = 1;   // the first prompt token whose logprob is wanted, >= 1
};

// Throws naming `who` when top or first is out of range.
void validate_prompt_scoring(const PromptScoring& s, const std::string& who);

// Fills chunk->score for the prompt positions of the chunk at or after *next_pos (positions already
// scored before a preemption are not scored again) and advances *next_pos past them.
void assign_chunk_scoring(const PromptScoring& s, const std::vector<int32_t>& prompt, int32_t* next_pos,
                          SeqChunk* chunk);

}  // namespace conveyor
