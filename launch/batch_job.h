// An offline batch job on one rank: requests JSONL in, OpenAI Batch results out, resumable. Invalid
// lines go to the error file before any model work; requests already in the output are skipped; a
// stop signal ends admission, flushes what finished and exits with kExitInterrupted (rerun resumes).
#pragma once

#include <string>

#include "runtime/config.h"
#include "runtime/engine.h"

namespace conveyor {

struct BatchJobOptions {
  std::string input, output, errors;
  bool strict = false;
  std::string model;                // path, recorded in the manifest and the results
  std::string chat_template_name;   // --chat-template, "" to detect from the model
  std::string model_chat_template;  // the model's Jinja template, "" when it has none
};

// The model's chat template text: GGUF tokenizer.chat_template or tokenizer_config.json's chat_template.
std::string model_chat_template(const std::string& model_path);

// Returns the exit status: 0, or kExitInterrupted after a stop signal.
int run_batch_job(const Config& cfg, Engine& engine, const BatchJobOptions& opt);

}  // namespace conveyor
