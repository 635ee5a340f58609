# Body of batch_signal.sh (one rank), batch_signal_mpi.sh (a 2-rank pipeline under mpirun) and
# batch_signal_gpu_mpi.sh (the same on CUDA ranks); the caller sets `bin`, `launch`, `layout` and
# `stop_signals`, and may set `kill_ranks` (the ranks kill -9 hits in turn; default 1) and
# `same_texts=0` (only every custom_id once: bf16 greedy text may follow another batch composition) and
# `n_requests` (default 32; a GPU finishes 32 before a signal lands, so its caller asks for more).
# Under mpirun the signals go to mpirun (as Slurm's would go to srun), and kill -9 hits one rank: every rank must exit, non-zero, without hanging.
# SIGTERM in the middle of a batch job: the job stops within seconds with exit status 75 and a line
# saying how many are done and that rerunning resumes; the rerun completes the job; the final output holds
# every custom_id exactly once with the same greedy texts as an uninterrupted run. The same after kill -9
# (no chance to flush: a torn last line is dropped on resume).
source "$(dirname "${BASH_SOURCE[0]}")/common.bash"
n_requests=${n_requests:-32}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - "$n_requests" > "$tmp/in.jsonl" <<'PY'
import json, sys
for i in range(int(sys.argv[1])):
    body = {"prompt": f"Story number {i}: once upon a time", "max_tokens": 4 + (i * 7) % 40, "temperature": 0}
    print(json.dumps({"custom_id": f"r{i}", "method": "POST", "url": "/v1/completions", "body": body}))
PY
job() { timeout 300 "${launch[@]}" "$bin" generate "${layout[@]}" --model "$gguf" --input "$tmp/in.jsonl" --output "$1" --max-num-seqs 8 \
  --num-gpu-blocks-override 512 2>"$1.log"; }
job "$tmp/full.jsonl" || { echo "FAIL: uninterrupted run exited $?"; cat "$tmp/full.jsonl.log"; exit 1; }

# The pid of MPI rank <rank> among the children of mpirun <pid>.
rank_pid() {
  local p
  for p in $(pgrep -P "$1"); do
    if tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then echo $p; return; fi
  done
}

# Whether this machine's mpirun forwards SIG<name> to its ranks (Open MPI forwards SIGUSR1/SIGUSR2 unless
# ess_base_forward_signals says otherwise): one rank of bash traps it. Prints what was found.
mpirun_forwards() {  # <signal name> [mpirun args]
  local sig=$1 mark="$tmp/forwarded_$1"
  shift
  rm -f "$mark"
  mpirun --oversubscribe -np 1 "$@" bash -c "trap 'echo yes > $mark; exit 0' $sig; for _ in \$(seq 1 100); do sleep 0.05; done" &
  local p=$!
  sleep 1.5
  kill -"$sig" $p
  wait $p 2>/dev/null
  [ -s "$mark" ]
}

# Under mpirun, SIGUSR1/SIGUSR2 reach the ranks only where mpirun forwards them. The GPU machine's
# mpirun (Open MPI 4.1.6) let a SIGUSR1 job run to its end (2026-12-05): find out which side it is, say
# so, and where the launcher does not forward, deliver the signal to every rank as srun's slurmstepd
# does, so that what is tested stays conveyor's own handling.
signal_targets_ranks=()
for sig in "${stop_signals[@]}"; do
  [ ${#launch[@]} -gt 0 ] && [ "$sig" != TERM ] || continue
  if mpirun_forwards "$sig"; then
    echo "mpirun forwards SIG$sig to its ranks"
  else
    echo "NOTE: this machine's mpirun does not forward SIG$sig to its ranks ($(mpirun --version 2>&1 | head -1);" \
      "OMPI_MCA_ess_base_forward_signals=${OMPI_MCA_ess_base_forward_signals-unset};" \
      "$(ompi_info --param ess base --level 9 2>/dev/null | grep -i forward_signals | head -1 | tr -s ' '))"
    if mpirun_forwards "$sig" --mca ess_base_forward_signals "SIG$sig"; then
      echo "NOTE: with --mca ess_base_forward_signals SIG$sig it does; the test sends it to the ranks directly"
    else
      echo "NOTE: not with --mca ess_base_forward_signals SIG$sig either; the test sends it to the ranks directly"
    fi
    signal_targets_ranks+=("$sig")
  fi
done

interrupt_and_resume() {  # <signal> <output> [rank to kill -9]
  local sig=$1 out=$2 victim=${3:-1}
  "${launch[@]}" "$bin" generate "${layout[@]}" --model "$gguf" --input "$tmp/in.jsonl" --output "$out" --max-num-seqs 8 \
    --num-gpu-blocks-override 512 2>"$out.log" &
  local pid=$!  # conveyor (or mpirun) itself, not a subshell, receives the signal
  for _ in $(seq 1 100); do  # wait until some results are durable
    [ -s "$out" ] && [ "$(wc -l < "$out")" -ge 3 ] && break
    sleep 0.1
  done
  local target=$pid
  if [ ${#launch[@]} -gt 0 ] && [ "$sig" = KILL ]; then
    target=$(rank_pid $pid $victim)  # kill -9 one rank, not mpirun
    [ -n "$target" ] || { echo "FAIL: no rank $victim under mpirun $pid"; return 1; }
  elif [[ " ${signal_targets_ranks[*]} " == *" $sig "* ]]; then
    target="$(pgrep -P $pid | tr '\n' ' ')"  # every rank, as slurmstepd signals every task
  fi
  local masks="" p  # each process's signal masks when the signal is sent, shown if it is not honoured
  for p in $pid $(pgrep -P $pid); do masks+="pid $p: $(grep -E 'SigBlk|SigIgn|SigCgt' /proc/$p/status 2>/dev/null | tr '\n\t' '  ')"$'\n'; done
  local lines_at_signal
  lines_at_signal=$(wc -l < "$out" 2>/dev/null || echo 0)
  kill -"$sig" $target  # $target unquoted: one pid, or every rank's
  local t0 rc took
  t0=$(date +%s)
  wait $pid
  rc=$?
  took=$(( $(date +%s) - t0 ))
  sleep 0.5
  if pgrep -f -- "--output $out" > /dev/null; then
    echo "FAIL: a process of the job outlived it after SIG$sig:"; pgrep -af -- "--output $out"; return 1
  fi
  if [ "$sig" = TERM ] && [ ${#launch[@]} -gt 0 ]; then
    # mpirun turns SIGTERM into "terminate the job": it forwards it, then reports its own failure
    # status. The leader still stops admitting, flushes and says how to resume.
    [ $rc != 0 ] || { echo "FAIL: SIGTERM to mpirun exited 0"; return 1; }
    [ $took -le 5 ] || { echo "FAIL: took ${took}s to stop"; return 1; }
    grep -qi "rerun" "$out.log" || { echo "FAIL: no resumable message"; cat "$out.log"; return 1; }
  elif [ "$sig" != KILL ]; then
    [ $rc = 75 ] || { echo "FAIL: SIG$sig exit status $rc (want 75), sent with $lines_at_signal results written; masks then:"
                      echo "$masks"; cat "$out.log"; return 1; }
    [ $took -le 5 ] || { echo "FAIL: took ${took}s to stop"; return 1; }
    grep -qi "rerun" "$out.log" || { echo "FAIL: no resumable message"; cat "$out.log"; return 1; }
  else
    [ $rc != 0 ] || { echo "FAIL: kill -9 exit status 0"; return 1; }
  fi
  local before
  before=$(wc -l < "$out")
  [ "$before" -lt "$n_requests" ] || { echo "FAIL: the job finished before the signal; make it longer"; return 1; }
  job "$out" || { echo "FAIL: rerun after $sig exited $?"; cat "$out.log"; return 1; }
  python3 - "$tmp/full.jsonl" "$out" "$before" "$sig" "${same_texts:-1}" "$n_requests" <<'PY'
import json, sys
full_path, out_path, before, sig, same = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5] == "1"
n = int(sys.argv[6])
def texts(path):
    out = {}
    for line in open(path):
        o = json.loads(line)
        assert o["custom_id"] not in out, "written twice: " + o["custom_id"]
        out[o["custom_id"]] = o["response"]["body"]["choices"][0]["text"]
    return out
full, resumed = texts(full_path), texts(out_path)
assert sorted(resumed) == sorted(full) and len(full) == n, (len(resumed), len(full))
diff = [k for k in full if full[k] != resumed[k]]
assert not (same and diff), diff
print(f"SIG{sig}: interrupted after {before}/{n}, rerun completed; every custom_id once" +
      ("; texts equal the uninterrupted run" if same else f"; {len(full) - len(diff)}/{n} texts equal"))
PY
}
for sig in "${stop_signals[@]}"; do
  interrupt_and_resume "$sig" "$tmp/stop_$sig.jsonl" || exit 1
done
for victim in "${kill_ranks[@]:-1}"; do
  interrupt_and_resume KILL "$tmp/kill_$victim.jsonl" "$victim" || exit 1
done
