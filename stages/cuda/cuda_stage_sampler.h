// The last stage's sampler on the CUDA backend: CudaSampler over the LM head's device logits, with the
// per-sequence state (seed, parameters, prompt ids, outputs) kept by a PlanSampler exactly as on the
// CPU, so the plan's new_seqs / retired / eos_ids drive both and the tokens are the CPU's. Only the
// sampled tokens cross the bus; sample() is the step's one host synchronisation.
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/cuda/sampling.h"
#include "runtime/sampling/params.h"
#include "stages/plan_sampler.h"

namespace conveyor {

// One sequence's parameters as the CUDA sampler reads them (greedy as temperature 0; step = outputs).
SamplingRowParams sampling_row_params(const SamplingParams& p, uint64_t seed, size_t num_outputs);

// stream: the ops' stream (Ops::stream()); max_rows: rows sampled per launch (a plan with more
// logits rows is sampled in several launches). Allocates the sampler's workspace
// (cuda_sampler_workspace_bytes, kernels/cuda/sampling.h) now, once; sampling allocates nothing.
std::unique_ptr<StageSampler> make_cuda_stage_sampler(void* stream, int64_t vocab, int max_rows);

}  // namespace conveyor
