#!/usr/bin/env bash
# One job per output: two `conveyor generate --input/--output` jobs started at once on the same
# --output. Exactly one runs to the end; the other exits non-zero naming the holder (its pid and host);
# the output holds every custom_id exactly once, and a rerun resumes it with nothing left to do.
set -u
bin=$1
source "$(dirname "${BASH_SOURCE[0]}")/common.bash"
tmp=$(mktemp -d)
p1= p2=
trap 'kill $p1 $p2 2>/dev/null; rm -rf "$tmp"' EXIT
for i in $(seq 1 40); do
  echo "{\"custom_id\": \"r$i\", \"method\": \"POST\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": \"Count to $i:\", \"max_tokens\": 16, \"temperature\": 0}}"
done > "$tmp/in.jsonl"
job() {  # exec: $! is the conveyor process itself, the pid the lock file names
  exec "$bin" generate --model "$gguf" --input "$tmp/in.jsonl" --output "$tmp/out.jsonl" \
    --num-gpu-blocks-override 256 2>"$tmp/err$1"
}
job 1 & p1=$!
job 2 & p2=$!
wait $p1; s1=$?
wait $p2; s2=$?
echo "job 1 (pid $p1) exited $s1, job 2 (pid $p2) exited $s2"
pids=($p1 $p2); p1= p2=  # both reaped: nothing for the trap to kill
if (( s1 == 0 && s2 != 0 )); then winner=${pids[0]} loser=2
elif (( s2 == 0 && s1 != 0 )); then winner=${pids[1]} loser=1
else echo "FAIL: expected exactly one job to succeed"; cat "$tmp/err1" "$tmp/err2"; exit 1; fi
grep -q "is in use by another job: pid $winner on host $(hostname)" "$tmp/err$loser" \
  || { echo "FAIL: the refused job does not name the holder (pid $winner)"; cat "$tmp/err$loser"; exit 1; }
grep -q "another --output" "$tmp/err$loser" || { echo "FAIL: the refusal says not what to do"; exit 1; }
check_once() {
  python3 - "$tmp/out.jsonl" <<'PY'
import collections, json, sys
ids = [json.loads(l)["custom_id"] for l in open(sys.argv[1])]
counts = collections.Counter(ids)
assert sorted(counts) == sorted(f"r{i}" for i in range(1, 41)), sorted(counts)
assert all(n == 1 for n in counts.values()), [i for i, n in counts.items() if n > 1]
PY
}
check_once || { echo "FAIL: the output does not hold every custom_id exactly once"; exit 1; }
[[ ! -s "$tmp/out.jsonl.lock" ]] || { echo "FAIL: the lock file was not emptied at the end"; exit 1; }
"$bin" generate --model "$gguf" --input "$tmp/in.jsonl" --output "$tmp/out.jsonl" \
  --num-gpu-blocks-override 256 2>"$tmp/err3" || { echo "FAIL: resume exited $?"; cat "$tmp/err3"; exit 1; }
check_once || { echo "FAIL: the resume wrote a custom_id twice"; exit 1; }
echo ok
