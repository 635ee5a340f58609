#!/usr/bin/env bash
# Regenerates every committed file under tests/data/tokenizer (corpus, our SentencePiece-style
# tokenizer and its GGUF-style metadata, HF expected ids) from the scripts beside this one.
#   usage: scripts/make_tokenizer_test_data.sh     (runs scripts/prepare_tokenizer_data.sh first)
# Deterministic for fixed versions of tokenizers and transformers.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
data="$here/../tests/data/tokenizer"
cache="${CONVEYOR_CACHE:-$HOME/.cache/conveyor}"
bash "$here/prepare_tokenizer_data.sh" >/dev/null
expected() { python3 "$here/make_tokenizer_expected.py" "$@" 2>&1 | grep -v "PyTorch was not found" || true; }

python3 "$here/make_tokenizer_corpus.py" "$data/corpus.jsonl"
python3 "$here/train_sp_tokenizer.py" "$data/corpus.jsonl" "$data/sp_bpe.json"
python3 "$here/export_gguf_tokenizer.py" from-json "$data/sp_bpe.json" "$data/sp_bpe_gguf_meta.json" 2>&1 |
  grep -v "PyTorch was not found" || true

expected --tokenizer-json "$cache/smollm2_tokenizer.json" "$data/corpus.jsonl" "$data/smollm2_expected.jsonl" \
  --random-decode "$data/smollm2_decode_random.jsonl"
expected --tokenizer-json "$data/sp_bpe.json" "$data/corpus.jsonl" "$data/sp_bpe_expected.jsonl" \
  --random-decode "$data/sp_bpe_decode_random.jsonl"
expected --gguf-meta "$data/sp_bpe_gguf_meta.json" "$data/corpus.jsonl" "$data/sp_bpe_gguf_expected.jsonl"
# Variants: other pre-tokenizers and added-token options on the same vocabularies (edge cases, then every 3rd string).
expected --tokenizer-json "$cache/smollm2_tokenizer.json" --patch "$data/variant_llama3_style.json" --head 120 --stride 3 \
  "$data/corpus.jsonl" "$data/variant_llama3_style_expected.jsonl"
expected --tokenizer-json "$data/sp_bpe.json" --patch "$data/variant_metaspace.json" --head 120 --stride 3 \
  "$data/corpus.jsonl" "$data/variant_metaspace_expected.jsonl"
# (qwen2's regex gives the same ids as llama-bpe's on SmolLM2's vocabulary, which has no multi-digit
# tokens, so only llama-bpe is recorded.)
expected --gguf-meta "$cache/smollm2_gguf_tokenizer.json" --pre llama-bpe --head 120 --stride 3 \
  "$data/corpus.jsonl" "$data/smollm2_gguf_pre_llama-bpe_expected.jsonl"
