// Finds and loads the tokenizer of a model: an explicit tokenizer path (tokenizer.json or a directory
// holding one), else the model directory's tokenizer.json, else a GGUF file's tokenizer.ggml.* metadata.
// BOS/EOS come from the model spec where the tokenizer file does not say. Returns nullptr when the
// model has no tokenizer (a directory without tokenizer files still runs with token-id prompts).
#pragma once

#include <memory>
#include <string>

#include "runtime/model/spec.h"
#include "runtime/tokenizer/tokenizer.h"

namespace conveyor {

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& model_path, const std::string& tokenizer_path,
                                          const ModelSpec& spec);

}  // namespace conveyor
