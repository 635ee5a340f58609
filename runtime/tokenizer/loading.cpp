// load_tokenizer (see runtime/tokenizer/loading.h): which file holds a model's tokenizer, in the order an
// explicit --tokenizer path, the model directory's tokenizer.json, a GGUF file's metadata. BOS/EOS are
// then settled once here: generation_config.json / config.json (through ModelSpec) say which ids end
// generation, which tokenizer.json does not record; the tokenizer's own BOS stays when it has one.
#include "runtime/tokenizer/loading.h"

#include <filesystem>

#include "runtime/core/error.h"
#include "runtime/core/strings.h"
#include "runtime/model/gguf_file.h"

namespace conveyor {
namespace {

namespace fs = std::filesystem;

constexpr const char* kTokenizerJson = "tokenizer.json";

// A checked id from the spec: a negative or out-of-vocabulary id would index past the embedding.
int32_t spec_token_id(int64_t id, const ModelSpec& spec, const char* what) {
  CONVEYOR_CHECK(id >= 0 && (spec.vocab <= 0 || id < spec.vocab), spec.source, ": ", what, " ", id,
                 " is outside the vocabulary of ", spec.vocab, " tokens; fix config.json / generation_config.json");
  return static_cast<int32_t>(id);
}

// The spec overrides EOS when it names any (generation_config.json may list several); BOS comes from
// the tokenizer's post-processor when it has one, else from the spec.
Tokenizer with_spec_bos_eos(Tokenizer tok, const ModelSpec& spec) {
  int32_t bos = tok.bos_id();
  if (bos < 0 && spec.bos_token_id) bos = spec_token_id(*spec.bos_token_id, spec, "bos_token_id");
  std::vector<int32_t> eos = tok.eos_ids();
  if (!spec.eos_token_ids.empty()) {
    eos.clear();
    for (int64_t id : spec.eos_token_ids) eos.push_back(spec_token_id(id, spec, "eos_token_id"));
  }
  tok.set_bos_eos(bos, std::move(eos));
  return tok;
}

// A directory's tokenizer.json, or nullptr when the directory has no tokenizer files at all.
std::unique_ptr<Tokenizer> from_directory(const fs::path& dir, bool required) {
  const fs::path json = dir / kTokenizerJson;
  if (fs::is_regular_file(json)) return std::make_unique<Tokenizer>(Tokenizer::from_json_file(json.string()));
  // A SentencePiece .model alone cannot be read; running without a tokenizer would only surprise later.
  CONVEYOR_CHECK(!fs::exists(dir / "tokenizer.model"), "'", dir.string(),
                 "' has tokenizer.model but no tokenizer.json; conveyor reads tokenizer.json: write one with "
                 "transformers (AutoTokenizer.from_pretrained(dir).save_pretrained(dir)) or pass --tokenizer");
  CONVEYOR_CHECK(!required, "tokenizer directory '", dir.string(), "' has no ", kTokenizerJson,
                 "; pass a tokenizer.json file or a directory holding one");
  return nullptr;
}

std::unique_ptr<Tokenizer> from_gguf_path(const std::string& path, bool required) {
  const GgufFile gguf(path);
  if (!gguf_has_tokenizer(gguf)) {
    CONVEYOR_CHECK(!required, "GGUF file '", path, "' has no tokenizer (no tokenizer.ggml.tokens); ",
                   "pass a tokenizer.json with --tokenizer");
    return nullptr;
  }
  return std::make_unique<Tokenizer>(tokenizer_from_gguf(gguf));
}

// The explicit --tokenizer path: it must hold a tokenizer.
std::unique_ptr<Tokenizer> from_explicit_path(const std::string& path) {
  CONVEYOR_CHECK(fs::exists(path), "tokenizer path '", path, "' does not exist; pass a tokenizer.json, a directory ",
                 "holding one, or a .gguf file");
  if (fs::is_directory(path)) return from_directory(path, /*required=*/true);
  if (ends_with(path, ".gguf")) return from_gguf_path(path, /*required=*/true);
  return std::make_unique<Tokenizer>(Tokenizer::from_json_file(path));
}

// The model's own tokenizer: beside an HF checkpoint, or inside a GGUF file. Presets (YAML, dummy
// weights) have none.
std::unique_ptr<Tokenizer> from_model_path(const std::string& path) {
  if (path.empty()) return nullptr;
  if (fs::is_directory(path)) return from_directory(path, /*required=*/false);
  if (ends_with(path, ".gguf")) return from_gguf_path(path, /*required=*/false);
  // A config.json given directly: its directory may hold the tokenizer.
  if (fs::path(path).filename() == "config.json") return from_directory(fs::path(path).parent_path(), false);
  return nullptr;
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& model_path, const std::string& tokenizer_path,
                                          const ModelSpec& spec) {
  std::unique_ptr<Tokenizer> tok =
      tokenizer_path.empty() ? from_model_path(model_path) : from_explicit_path(tokenizer_path);
  if (!tok) return nullptr;
  return std::make_unique<Tokenizer>(with_spec_bos_eos(std::move(*tok), spec));
}

}  // namespace conveyor
