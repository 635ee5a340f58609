#!/usr/bin/env bash
# prompt_logprobs (vLLM's request parameter) in a batch job against transformers' log-probabilities
# on a tiny checkpoint (scripts/make_prompt_logprobs_reference.py), with prefill chunked into pieces
# of 8 tokens so that scored rows cross chunk boundaries. Tolerance per dtype: CONVEYOR_TEST_DTYPE
# (float32 by default; bfloat16/float16 on a GPU with CONVEYOR_TEST_BACKEND=cuda). A value out of
# range is an error line.
set -u
bin=$1
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
data="$here/../data"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
backend=${CONVEYOR_TEST_BACKEND:-cpu}
dtype=${CONVEYOR_TEST_DTYPE:-float32}
ref="$data/perplexity/prompt_logprobs_reference.json"
python3 - "$ref" > "$dir/in.jsonl" <<'PY'
import json, sys
ref = json.load(open(sys.argv[1]))
for i, p in enumerate(ref["prompts"]):
    body = {"prompt": p["prompt_ids"], "max_tokens": 1, "temperature": 0, "prompt_logprobs": ref["top"]}
    print(json.dumps({"custom_id": f"p{i}", "method": "POST", "url": "/v1/completions", "body": body}))
print(json.dumps({"custom_id": "bad", "url": "/v1/completions", "body": {"prompt": [5, 6], "prompt_logprobs": 21}}))
PY
"$bin" generate --model "$data/goldens/llama_deep" --input "$dir/in.jsonl" --output "$dir/out.jsonl" \
  --max-num-batched-tokens 8 --dtype "$dtype" --set runtime.backend="$backend" 2> "$dir/stderr" ||
  { echo "FAIL: generate exited $?"; cat "$dir/stderr"; exit 1; }
python3 - "$ref" "$dir/out.jsonl" "$dir/out.jsonl.errors.jsonl" "$dtype" <<'PY'
import json, sys
ref = json.load(open(sys.argv[1]))
tol = {"float32": 2e-4, "float16": 2e-2, "bfloat16": 8e-2}[sys.argv[4]]
results = {r["custom_id"]: r for r in map(json.loads, open(sys.argv[2]))}
errors = [json.loads(l) for l in open(sys.argv[3])]
assert [e["custom_id"] for e in errors] == ["bad"], errors
assert "prompt_logprobs" in errors[0]["response"]["body"]["error"]["message"], errors[0]
worst, checked = 0.0, 0
for i, p in enumerate(ref["prompts"]):
    got = results[f"p{i}"]["response"]["body"]["choices"][0]["prompt_logprobs"]
    assert len(got) == len(p["prompt_ids"]) and got[0] is None, f"p{i}: {len(got)} entries for {len(p['prompt_ids'])} tokens"
    for pos, want in enumerate(p["positions"], start=1):
        entry = got[pos]
        mine = entry[str(want["token"])]
        worst = max(worst, abs(mine["logprob"] - want["logprob"]))
        assert abs(mine["logprob"] - want["logprob"]) <= tol, f"p{i} position {pos}: {mine} vs {want}"
        if sys.argv[4] == "float32":
            assert mine["rank"] == want["rank"], f"p{i} position {pos}: rank {mine['rank']} vs {want['rank']}"
        for r, (tok, lp) in enumerate(want["top"], start=1):
            t = entry.get(str(tok))
            if sys.argv[4] == "float32":
                assert t is not None and t["rank"] == r or (t is not None and str(tok) == str(want["token"])), \
                    f"p{i} position {pos}: top {r} token {tok} missing or ranked {t}"
            if t is not None:
                assert abs(t["logprob"] - lp) <= tol, f"p{i} position {pos} top {tok}: {t} vs {lp}"
        checked += 1
print(f"PASS: {checked} prompt positions within {tol} of transformers (worst {worst:.2e}), bad value refused")
PY
