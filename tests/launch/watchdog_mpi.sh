#!/usr/bin/env bash
# A stalled or dead peer ends the job: SIGSTOP one rank of a 2-stage pipeline; the other's watchdog
# fires after runtime.watchdog_timeout, names what it waited for and where, and MPI_Abort ends every
# rank (mpirun exits non-zero) within the deadline plus a few seconds. kill -9 of a rank: every rank
# exits non-zero as fast. No hang. Runs on whatever backend `auto` picks (GPUs on the GPU machine).
set -u
bin=$1
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
model="$here/../data/goldens/llama_deep"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - > "$tmp/in.jsonl" <<'PY'
import json
for i in range(64):
    body = {"prompt": [1 + (i + t) % 200 for t in range(10)], "max_tokens": 400, "temperature": 0, "ignore_eos": True}
    print(json.dumps({"custom_id": f"r{i}", "method": "POST", "url": "/v1/completions", "body": body}))
PY
for sig in STOP KILL; do
  rm -f "$tmp"/out.jsonl*
  mpirun --oversubscribe -np 2 "$bin" generate --model "$model" -pp 2 --input "$tmp/in.jsonl" \
    --output "$tmp/out.jsonl" --watchdog-timeout 3 2> "$tmp/err" &
  pid=$!
  rank1=""
  for _ in $(seq 1 100); do  # until the job is generating
    for p in $(pgrep -P $pid); do
      tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1" && rank1=$p
    done
    [ -n "$rank1" ] && grep -q progress "$tmp/err" 2>/dev/null && break
    sleep 0.1
  done
  [ -n "$rank1" ] || { echo "FAIL: rank 1 not found"; cat "$tmp/err"; kill -9 $pid; exit 1; }
  kill -"$sig" "$rank1"
  t0=$(date +%s)
  for _ in $(seq 1 300); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done  # 30 s at most
  kill -9 $pid 2>/dev/null
  wait $pid
  rc=$?
  took=$(( $(date +%s) - t0 ))
  kill -9 "$rank1" 2>/dev/null
  grep -v "^progress" "$tmp/err" | head -20
  [ $rc != 0 ] || { echo "FAIL: exit status 0 after a stalled peer"; exit 1; }
  [ $took -le 10 ] || { echo "FAIL: took ${took}s (deadline 3 s)"; exit 1; }
  if [ "$sig" = STOP ]; then
    grep -q "no progress for" "$tmp/err" || { echo "FAIL: the watchdog did not say what stalled"; exit 1; }
    grep -q "stage 1" "$tmp/err" || { echo "FAIL: the message does not name the stalled stage"; exit 1; }
  fi
  echo "ok: SIG$sig of rank 1: the job exited $rc after ${took}s"
done
