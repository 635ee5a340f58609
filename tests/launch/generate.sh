#!/usr/bin/env bash
# `conveyor generate` end to end on one rank: the real SmolLM2 GGUF answers a chat prompt (streamed
# text, --print-ids as the last line, stop strings), the tiny transformers goldens (no tokenizer) give
# their greedy ids exactly from --prompt-ids, and bad prompts or flags exit 1 naming the problem.
# The GGUF is required, never skipped: scripts/fetch_test_model.sh (or set CONVEYOR_TEST_MODEL).
set -u
bin=$1
source "$(dirname "${BASH_SOURCE[0]}")/common.bash"
fail=0
out=""
# run <exit status> <command...>: keeps stdout (and stderr when the status is not 0) in $out
run() {
  local want_rc=$1 rc; shift
  if [[ $want_rc == 0 ]]; then out=$("$@" 2>/dev/null); else out=$("$@" 2>&1); fi
  rc=$?
  if [[ $rc != "$want_rc" ]]; then
    echo "FAIL: '$*' exited $rc (wanted $want_rc):"; echo "$out"; "$@" 2>&1 | tail -3; fail=1
  fi
}
has() {
  for want in "$@"; do
    if [[ "$out" != *"$want"* ]]; then echo "FAIL: wanted '$want' in:"; echo "$out"; fail=1; fi
  done
}


# SmolLM2: a chat answer, greedy; the ids line is last and ends with <|im_end|> (id 2).
run 0 "$bin" generate --model "$gguf" --chat --prompt "What is the capital of France?" --temperature 0 \
  --max-tokens 24 --print-ids --num-gpu-blocks-override 64
has "Paris"
ids=$(tail -n 1 <<<"$out")
if [[ ! "$ids" =~ ^[0-9]+(,[0-9]+)*$ || "$ids" != *",2" ]]; then echo "FAIL: last line '$ids' is not the ids"; fail=1; fi
echo "smollm2 chat: $(head -n -1 <<<"$out") | ids $ids"
# A stop string cuts the text before it.
run 0 "$bin" generate --model "$gguf" --chat --prompt "What is the capital of France?" --temperature 0 \
  --max-tokens 12 --stop " is" --num-gpu-blocks-override 64
if [[ "$out" != "The capital of France" ]]; then echo "FAIL: stop ' is' gave '$out'"; fail=1; fi

# Tiny goldens: greedy ids from transformers, EOS ignored, prompts as token ids.
for model in llama3_rope llama_hd128 qwen2_tied_mqa mistral_swa llama_dynamic; do
  dir="$data/goldens/$model"
  [[ -f "$dir/golden.json" ]] || { echo "FAIL: $dir/golden.json missing"; fail=1; continue; }
  while IFS=' ' read -r prompt want n; do
    run 0 "$bin" generate --model "$dir" --prompt-ids "$prompt" --temperature 0 --ignore-eos --max-tokens "$n" \
      --print-ids --max-num-batched-tokens 16 --num-gpu-blocks-override 16
    got=$(tail -n 1 <<<"$out")
    if [[ "$got" != "$want" ]]; then echo "FAIL: $model prompt $prompt: got $got, want $want"; fail=1; fi
  done < <(python3 - "$dir/golden.json" <<'PY'
import json, os, sys
g = json.load(open(sys.argv[1]))
max_pos = json.load(open(os.path.join(os.path.dirname(sys.argv[1]), "config.json")))["max_position_embeddings"]
for p in g["prompts"][:3]:
    # transformers runs past max_position_embeddings (dynamic rope); conveyor stops there with "length".
    n = min(len(p["greedy_ids"]), max_pos - len(p["prompt_ids"]))
    print(",".join(map(str, p["prompt_ids"])), ",".join(map(str, p["greedy_ids"][:n])), n)
PY
  )
done

# Errors name the problem and exit 1.
tiny="$data/goldens/llama3_rope"
run 1 "$bin" generate --model "$tiny" --prompt "hello"
has "needs a tokenizer" "--prompt-ids"
run 1 "$bin" generate --model "$tiny" --prompt-ids 1,2,320
has "prompt token id 320 at position 2 is outside the model's vocabulary [0, 320)"
run 1 "$bin" generate --model "$tiny" --prompt-ids 1,2,3,4 --max-model-len 4
has "the prompt has 4 tokens" "max_model_len is 4"
run 1 "$bin" generate --model "$tiny" --prompt-ids 1,x
has "'x' is not a token id"
run 1 "$bin" generate --model "$tiny" --prompt-ids 1 --top-p 1.5
has "top_p" "--top-p"
run 1 "$bin" generate --model "$tiny"
has "give exactly one of --prompt and --prompt-ids"
exit $fail
