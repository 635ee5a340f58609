// A short English text built into the binary, for checks that must run without any file:
// `conveyor doctor --model M` scores it (about 600 tokens with a Llama/SmolLM2 tokenizer, two
// chunks of 256) and flags a model whose perplexity on it is absurd.
#pragma once

namespace conveyor {

const char* builtin_perplexity_text();

}  // namespace conveyor
