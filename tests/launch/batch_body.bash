# Body of batch.sh (one rank) and batch_mpi.sh (a 2-rank pipeline); the caller sets `bin`, `launch`
# (the command prefix: empty or mpirun) and `layout` (parallel flags).
# `conveyor generate --input/--output` with the real SmolLM2 GGUF: valid, invalid and duplicate lines
# give the expected results and error lines; --summary is written; a rerun resumes without writing
# anything twice; a changed input is refused. The GGUF is required, never skipped.
source "$(dirname "${BASH_SOURCE[0]}")/common.bash"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/in.jsonl" <<'JSONL'
{"custom_id": "a", "method": "POST", "url": "/v1/completions", "body": {"model": "smol", "prompt": "The sky is", "max_tokens": 8, "temperature": 0}}
{"custom_id": "b", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "smol", "messages": [{"role": "user", "content": "Name a color."}], "max_tokens": 12, "temperature": 0}}
{"custom_id": "c", "method": "POST", "url": "/v1/embeddings", "body": {"input": "x"}}
{"custom_id": "d", "method": "POST", "url": "/v1/completions", "body": {"prompt": "Hi", "top_p": 7}}
not json
{"prompt": [1, 2, 3], "max_tokens": 4, "temperature": 0}
{"custom_id": "e", "method": "POST", "url": "/v1/completions", "body": {"prompt": "dup"}}
{"custom_id": "e", "method": "POST", "url": "/v1/completions", "body": {"prompt": "dup"}}
JSONL
run() { timeout 300 "${launch[@]}" "$bin" generate --model "$gguf" --input "$tmp/in.jsonl" --output "$tmp/out.jsonl" \
  --num-gpu-blocks-override 256 --served-model-name smol --summary "$tmp/summary.json" "${layout[@]}" 2>"$tmp/err"; }
run || { echo "FAIL: first run exited $?"; cat "$tmp/err"; exit 1; }
run || { echo "FAIL: resume exited $?"; cat "$tmp/err"; exit 1; }
python3 - "$tmp" <<'PY' || exit 1
import json, sys
d = sys.argv[1]
out = [json.loads(l) for l in open(d + "/out.jsonl")]
ids = sorted(o["custom_id"] for o in out)
assert ids == ["a", "b", "line-6"], ids
for o in out:
    body = o["response"]["body"]
    assert o["response"]["status_code"] == 200 and body["usage"]["completion_tokens"] > 0, o
    assert len(body["choices"][0]["token_ids"]) == body["usage"]["completion_tokens"], o
chat = [o for o in out if o["custom_id"] == "b"][0]["response"]["body"]
assert chat["object"] == "chat.completion" and chat["choices"][0]["message"]["content"], chat
errs = [json.loads(l) for l in open(d + "/out.jsonl.errors.jsonl")]
lines = sorted(e["line"] for e in errs)
assert lines == [3, 4, 5, 7, 8], lines  # written once, not again on resume
msgs = " ".join(e["response"]["body"]["error"]["message"] for e in errs)
for want in ["unknown url", "top_p", "malformed JSON", "duplicate custom_id 'e' on lines 7, 8"]:
    assert want in msgs, (want, msgs)
s = json.load(open(d + "/summary.json"))
assert s["requests"] == 3 and s["resumed"] == 3 and s["completed"] == 0, s  # the summary of the resume run
for k in ["ttft_s", "tpot_s", "preemptions", "output_tokens_per_second", "pipeline"]:
    assert k in s, k
for st in s["pipeline"]["stages"]:
    assert abs(st["busy_pct"] + st["send_pct"] + st["bubble_pct"] - 100) < 1e-6, st
print("batch results, errors and summary as expected")
PY
echo '{"prompt": "new"}' >> "$tmp/in.jsonl"
if run; then echo "FAIL: resume with a changed input was accepted"; exit 1; fi
grep -q "the input differs" "$tmp/err" || { echo "FAIL: refusal does not say why"; cat "$tmp/err"; exit 1; }
echo ok
