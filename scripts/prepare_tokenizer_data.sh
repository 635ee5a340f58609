#!/usr/bin/env bash
# Puts the SmolLM2 tokenizer files the tokenizer tests read into the cache (outside the repo):
#   $CACHE/smollm2_tokenizer.json       HF tokenizer.json converted from the GGUF (the model's data)
#   $CACHE/smollm2_gguf_tokenizer.json  the GGUF's tokenizer.ggml.* keys as JSON
#   usage: scripts/prepare_tokenizer_data.sh     (cache: $CONVEYOR_CACHE or ~/.cache/conveyor)
# Idempotent. Needs python3 with gguf, tokenizers and transformers (pip install transformers).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${CONVEYOR_CACHE:-$HOME/.cache/conveyor}"
name="SmolLM2-135M-Instruct.Q4_1.gguf"
gguf="${CONVEYOR_TEST_MODEL:-$cache/$name}"

[[ -s "$gguf" ]] || gguf="$(bash "$here/fetch_test_model.sh")"

if [[ ! -s "$cache/smollm2_tokenizer.json" || ! -s "$cache/smollm2_gguf_tokenizer.json" ]]; then
  python3 -c "import transformers" 2>/dev/null || python3 -m pip install --quiet transformers >&2
  python3 "$here/export_gguf_tokenizer.py" from-gguf "$gguf" "$cache/smollm2_gguf_tokenizer.json.partial" \
    --hf-out "$cache/smollm2_tokenizer.json.partial"
  mv "$cache/smollm2_gguf_tokenizer.json.partial" "$cache/smollm2_gguf_tokenizer.json"
  mv "$cache/smollm2_tokenizer.json.partial" "$cache/smollm2_tokenizer.json"
fi
echo "$cache/smollm2_tokenizer.json"
echo "$cache/smollm2_gguf_tokenizer.json"
