# Sourced by stop_signals.sh and stop_signals_mpi.sh: one stop in the middle of a batch job, then
# its resume. The caller sets `launch`, `layout` and `target` (how to find who gets the signal).
stop_target() { echo "$pid"; }  # the launcher (or conveyor) itself, as Slurm's signal would reach srun

stop_case() {  # <signal> <times> <regex of the message>
  local sig=$1 times=$2 want=$3 out="$tmp/stop_$1_$2.jsonl"
  start_job "$out"
  wait_lines "$out" 3 || { echo "FAIL: no results after 30 s"; cat "$out.log"; kill -9 $pid; return 1; }
  local t0 target
  target=$(stop_target)
  t0=$(date +%s.%N)
  kill -$sig $target
  (( times == 1 )) || { sleep 0.05; kill -$sig $target 2>/dev/null; }
  reap $pid "$t0"
  local via=direct
  (( ${#launch[@]} )) && via="${launch[0]##*/}${layout[*]:+ ${layout[*]}}"
  report "SIG$sig x$times ($via)" $rc "$took" "$(said "$out.log" "stopped|error")"
  none_left "$out" || return 1
  [[ $rc == 75 ]] || { echo "FAIL: SIG$sig x$times: exit status $rc (want 75)"; cat "$out.log"; return 1; }
  # A first stop can finish (flush, report) before the second signal lands: then that signal exits
  # silently (signals.h, mark_stop_reported) and the job's one message is the first stop's.
  if (( times == 2 )) && ! grep -Eq "$want" "$out.log" && grep -Eq "stopped by SIG$sig.*requests are done" "$out.log"; then
    echo "SIG$sig x2: the stop was reported before the second signal arrived; that signal added nothing"
    want="stopped by SIG$sig"
  fi
  grep -Eq "$want" "$out.log" || { echo "FAIL: SIG$sig x$times: no line like '$want'"; cat "$out.log"; return 1; }
  [[ $(grep -c "stopped" "$out.log") == 1 ]] || { echo "FAIL: SIG$sig x$times: want one message"; cat "$out.log"; return 1; }
  # A first stop finishes the micro-batches in flight, seconds each on a loaded CI host.
  python3 -c "import sys; sys.exit(float(sys.argv[1]) > 20)" "$took" || { echo "FAIL: took ${took}s to stop"; return 1; }
  (( $(wc -l < "$out") < num_requests )) || { echo "FAIL: the job finished before the signal; make it longer"; return 1; }
  resume_and_check "$out" "SIG$sig x$times"
}
