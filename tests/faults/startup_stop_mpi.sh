#!/usr/bin/env bash
# A stop signal during start-up of a 2-rank pipeline (mpirun -np 2, -pp 2), once both ranks catch
# signals: SIGUSR1 and SIGUSR2 sent to mpirun (it forwards them), SIGTERM and SIGINT sent to
# scripts/mpirun_relay.sh (mpirun itself would kill the job and exit 1). Each ends with status 75
# and the start-up message printed once; the rerun completes the job as an uninterrupted run.
set -u
bin=$1
source "$(dirname "${BASH_SOURCE[0]}")/common.bash"
reference > /dev/null
for sig in USR1 USR2 TERM INT; do
  out="$tmp/out_$sig.jsonl"
  launcher=(mpirun)
  want="SIG$sig"
  case $sig in
    TERM) launcher=("$relay"); want="SIGTERM (relayed as SIGUSR1)" ;;
    INT) launcher=("$relay"); want="SIGINT (relayed as SIGUSR2)" ;;
  esac
  launch=("${launcher[@]}" --oversubscribe -np 2)
  layout=(-pp 2)
  start_job "$out"
  for r in 0 1; do
    p=""
    for _ in $(seq 1 100); do p=$(rank_pid $pid $r); [[ -n "$p" ]] && break; sleep 0.05; done
    [[ -n "$p" ]] && { wait_handlers $p || echo "note: rank $r does not catch SIGTERM during start-up"; }
  done
  t0=$(date +%s.%N)
  kill -$sig $pid
  reap $pid "$t0"
  msg=$(said "$out.log" "stopped|error|rerun")
  report "stop during start-up by SIG$sig (mpirun -np 2 -pp 2, via ${launcher[0]##*/})" $rc "$took" "$msg"
  none_left "$out" || exit 1
  [[ $rc == 75 ]] || { echo "FAIL: SIG$sig during start-up: exit status $rc (want 75)"; cat "$out.log"; exit 1; }
  line="conveyor: stopped by $want during start-up: nothing done yet; rerun the same command to resume (exit status 75)"
  [[ $(grep -cxF "$line" "$out.log") == 1 ]] || { echo "FAIL: SIG$sig: want once: $line"; cat "$out.log"; exit 1; }
done
mpirun --oversubscribe -np 2 "$bin" generate -pp 2 "${job_flags[@]}" --output "$out" 2> "$out.log" \
  || { echo "FAIL: rerun exited $?"; cat "$out.log"; exit 1; }
check_output "$out" "rerun under mpirun after a stop during start-up" || exit 1
echo ok
