# Body of watchdog_mpi.sh and watchdog_gpu_mpi.sh; the caller sets `bin`, `cases` (SIGNAL:RANK, e.g.
# STOP:1 KILL:0) and `backend` (extra arguments). A stalled or dead peer ends the job: SIGSTOP one rank
# of a 2-stage pipeline; a peer's watchdog fires after runtime.watchdog_timeout (3 s), names what it
# waited for and where, and MPI_Abort ends every rank (mpirun exits non-zero) within the deadline plus
# 5 s. kill -9 of a rank: every rank exits non-zero as fast. No hang.
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
for case_ in "${cases[@]}"; do
  sig=${case_%%:*}
  rank=${case_##*:}
  rm -f "$tmp"/out.jsonl*
  mpirun --oversubscribe -np 2 "$bin" generate --model "$model" -pp 2 "${backend[@]}" --input "$tmp/in.jsonl" \
    --output "$tmp/out.jsonl" --watchdog-timeout 3 2> "$tmp/err" &
  pid=$!
  target=""
  for _ in $(seq 1 300); do  # until the job is generating
    for p in $(pgrep -P $pid); do
      tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$rank" && target=$p
    done
    [ -n "$target" ] && grep -q progress "$tmp/err" 2>/dev/null && break
    sleep 0.1
  done
  [ -n "$target" ] || { echo "FAIL: rank $rank not found"; cat "$tmp/err"; kill -9 $pid; exit 1; }
  kill -"$sig" "$target"
  t0=$(date +%s)
  for _ in $(seq 1 300); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done  # 30 s at most
  kill -9 $pid 2>/dev/null
  wait $pid
  rc=$?
  took=$(( $(date +%s) - t0 ))
  kill -9 "$target" 2>/dev/null
  grep -v "^progress" "$tmp/err" | head -20
  [ $rc != 0 ] || { echo "FAIL: exit status 0 after a stalled peer"; exit 1; }
  [ $took -le 8 ] || { echo "FAIL: took ${took}s (deadline 3 s + 5 s)"; exit 1; }
  if [ "$sig" = STOP ]; then
    grep -q "no progress for" "$tmp/err" || { echo "FAIL: the watchdog did not say what stalled"; exit 1; }
    grep -q "stage $rank" "$tmp/err" || { echo "FAIL: the message does not name the stalled stage"; exit 1; }
  fi
  echo "ok: SIG$sig of rank $rank: the job exited $rc after ${took}s"
done
