#!/usr/bin/env bash
# A stop signal during start-up (model load) of a one-rank batch job: whichever of SIGTERM, SIGINT,
# SIGUSR1 and SIGUSR2, the job exits 75 with "nothing done yet; rerun the same command to resume" at
# once, leaves no result behind, and the rerun completes the job exactly as an uninterrupted run.
set -u
bin=$1
source "$(dirname "${BASH_SOURCE[0]}")/common.bash"
reference > /dev/null
for sig in TERM INT USR1 USR2; do
  out="$tmp/out_$sig.jsonl"
  ( exec "$bin" generate "${job_flags[@]}" --output "$out" 2> "$out.log" ) &
  pid=$!
  wait_handlers $pid || echo "note: conveyor $pid does not catch SIGTERM during start-up"
  t0=$(date +%s.%N)
  kill -$sig $pid
  reap $pid "$t0"
  msg=$(said "$out.log" "stopped|error|rerun")
  report "stop during start-up by SIG$sig (direct)" $rc "$took" "$msg"
  none_left "$out" || exit 1
  [[ $rc == 75 ]] || { echo "FAIL: SIG$sig during start-up: exit status $rc (want 75)"; cat "$out.log"; exit 1; }
  grep -qx "conveyor: stopped by SIG$sig during start-up: nothing done yet; rerun the same command to resume (exit status 75)" \
    "$out.log" || { echo "FAIL: SIG$sig during start-up: not the resumable message"; cat "$out.log"; exit 1; }
  [[ ! -s "$out" ]] || { echo "FAIL: results written before the model was loaded?"; exit 1; }
done
"$bin" generate "${job_flags[@]}" --output "$out" 2> "$out.log" || { echo "FAIL: rerun exited $?"; cat "$out.log"; exit 1; }
check_output "$out" "rerun after a stop during start-up" || exit 1
echo ok
