#!/usr/bin/env bash
# SIGTERM in the middle of a batch job: the job stops within seconds with exit status 75 and a line
# saying how many are done and that rerunning resumes; the rerun completes the job; the final output holds
# every custom_id exactly once with the same greedy texts as an uninterrupted run.
set -u
bin=$1
gguf="${CONVEYOR_TEST_MODEL:-${CONVEYOR_CACHE:-$HOME/.cache/conveyor}/SmolLM2-135M-Instruct.Q4_1.gguf}"
[ -s "$gguf" ] || { echo "FAIL: $gguf missing; run scripts/fetch_test_model.sh"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - > "$tmp/in.jsonl" <<'PY'
import json
for i in range(32):
    body = {"prompt": f"Story number {i}: once upon a time", "max_tokens": 4 + (i * 7) % 40, "temperature": 0}
    print(json.dumps({"custom_id": f"r{i}", "method": "POST", "url": "/v1/completions", "body": body}))
PY
job() { "$bin" generate --model "$gguf" --input "$tmp/in.jsonl" --output "$1" --max-num-seqs 8 \
  --num-gpu-blocks-override 512 2>"$1.log"; }
job "$tmp/full.jsonl" || { echo "FAIL: uninterrupted run exited $?"; cat "$tmp/full.jsonl.log"; exit 1; }

"$bin" generate --model "$gguf" --input "$tmp/in.jsonl" --output "$tmp/out.jsonl" --max-num-seqs 8 \
  --num-gpu-blocks-override 512 2>"$tmp/out.jsonl.log" &
pid=$!  # conveyor itself, not a subshell, receives the signal
for _ in $(seq 1 100); do  # wait until some results are durable
  [ -s "$tmp/out.jsonl" ] && [ "$(wc -l < "$tmp/out.jsonl")" -ge 3 ] && break
  sleep 0.1
done
kill -TERM $pid
t0=$(date +%s)
wait $pid
rc=$?
took=$(( $(date +%s) - t0 ))
[ $rc = 75 ] || { echo "FAIL: SIGTERM exit status $rc (want 75)"; cat "$tmp/out.jsonl.log"; exit 1; }
[ $took -le 5 ] || { echo "FAIL: took ${took}s to stop"; exit 1; }
grep -qi "rerun" "$tmp/out.jsonl.log" || { echo "FAIL: no resumable message"; cat "$tmp/out.jsonl.log"; exit 1; }
done_before=$(wc -l < "$tmp/out.jsonl")
[ "$done_before" -lt 32 ] || { echo "FAIL: the job finished before the signal; make it longer"; exit 1; }
job "$tmp/out.jsonl" || { echo "FAIL: rerun exited $?"; cat "$tmp/out.jsonl.log"; exit 1; }
python3 - "$tmp" "$done_before" <<'PY' || exit 1
import json, sys
d, before = sys.argv[1], int(sys.argv[2])
def texts(path):
    out = {}
    for line in open(path):
        o = json.loads(line)
        assert o["custom_id"] not in out, "written twice: " + o["custom_id"]
        out[o["custom_id"]] = o["response"]["body"]["choices"][0]["text"]
    return out
full, resumed = texts(d + "/full.jsonl"), texts(d + "/out.jsonl")
assert sorted(resumed) == sorted(full) and len(full) == 32, (len(resumed), len(full))
diff = [k for k in full if full[k] != resumed[k]]
assert not diff, diff
print(f"interrupted after {before}/32, rerun completed; texts equal the uninterrupted run")
PY
