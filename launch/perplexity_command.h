// `conveyor perplexity` (perplexity_command.cpp) and what `conveyor doctor --model` reuses of it:
// one perplexity evaluation over a started PipelineSession of any pp x tp layout.
#pragma once

#include <optional>
#include <string>

#include "launch/pipeline_session.h"
#include "runtime/config/config.h"
#include "runtime/eval/perplexity_run.h"
#include "runtime/model/spec.h"

namespace conveyor {

// Collective over the session's ranks: the leader tokenizes `text` with the model's tokenizer and
// drives an Engine through evaluate_perplexity; every other rank serves plans. Then all join the
// session's finish(). Returns the report on the leader, nothing elsewhere.
std::optional<PerplexityReport> perplexity_on_session(const Config& cfg, PipelineSession& session,
                                                      const ModelSpec& spec, const std::string& text,
                                                      PerplexityOptions opt);

}  // namespace conveyor
