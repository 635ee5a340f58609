#!/usr/bin/env bash
# `conveyor inspect`: the real SmolLM2 GGUF and HF directories written by transformers print the model
# spec, every tensor and the tokenizer; bad paths exit 1 with a message. The GGUF is required, never
# skipped: scripts/fetch_test_model.sh puts it in $CONVEYOR_CACHE (or set CONVEYOR_TEST_MODEL).
set -u
bin=$1
source "$(dirname "${BASH_SOURCE[0]}")/common.bash"
fail=0
out=""
# run <exit status> <command...>: keeps the output in $out
run() {
  local want_rc=$1 rc; shift
  out=$("$@" 2>&1); rc=$?
  if [[ $rc != "$want_rc" ]]; then
    echo "FAIL: '$*' exited $rc (wanted $want_rc):"; echo "$out"; fail=1
  fi
}
# has <expected substring>...: every one must be in the last output
has() {
  for want in "$@"; do
    if [[ "$out" != *"$want"* ]]; then echo "FAIL: wanted '$want' in:"; echo "$out"; fail=1; fi
  done
}

run 0 "$bin" inspect "$gguf"
has "format: GGUF v3" "tokenizer: byte-level BPE (tokenizer.ggml.*), vocab 49152, bos 1, eos 2" \
  "architecture      llama" "layers            30" "hidden            576" "heads / kv heads  9 / 3 (head_dim 64)" \
  "vocab             49152" "tied embeddings   yes" "tensors (272)" "token_embd.weight" "Q4_1" \
  "blk.29.ffn_down.weight"

# transformers 5 checkpoints: rope_parameters read, no tokenizer files (prompts must be token ids).
run 0 "$bin" inspect "$data/goldens/llama3_rope"
has "format: HF directory" "tokenizer: none found" "rope_theta        500000" "rope scaling      llama3 (factor 8)" \
  "heads / kv heads  4 / 2 (head_dim 32)" "tensors (30)" "model.layers.2.mlp.down_proj.weight" "F32" "[128, 160]"
run 0 "$bin" inspect --no-tensors "$data/formats/llama_dynamic_sharded_bf16"
has "rope scaling      dynamic (factor 2)" "dtype             bfloat16"
[[ "$out" != *"tensors ("* ]] || { echo "FAIL: --no-tensors listed tensors:"; echo "$out"; fail=1; }

# A directory with a tokenizer.json: the tokenizer is loaded, EOS from generation_config.json.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$data/goldens/qwen2_tied_mqa/config.json" "$data/tokenizer/sp_bpe.json" "$tmp/"
mv "$tmp/sp_bpe.json" "$tmp/tokenizer.json"
echo '{"bos_token_id": 1, "eos_token_id": [2, 3]}' > "$tmp/generation_config.json"
run 0 "$bin" inspect --no-tensors "$tmp"
has "tokenizer: sentencepiece BPE (tokenizer.json), vocab" "bos 1, eos 2,3" "architecture      qwen2"
echo '{"model": ' > "$tmp/tokenizer.json"
run 0 "$bin" inspect --no-tensors "$tmp"
has "tokenizer: not loadable:" "$tmp/tokenizer.json is not valid JSON"

run 1 "$bin" inspect "$tmp/nope"
has "does not exist"
exit $fail
