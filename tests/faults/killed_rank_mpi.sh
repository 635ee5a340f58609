#!/usr/bin/env bash
# kill -9 of the leader and of the non-leader of a 2-rank pipeline batch job: every rank exits
# non-zero within seconds (no hang); the rerun completes the job as an uninterrupted run (a torn last
# line is dropped).
set -u
bin=$1
source "$(dirname "${BASH_SOURCE[0]}")/common.bash"
layout=(-pp 2)
launch=(mpirun --oversubscribe -np 2)
for killed in 0 1; do
  out="$tmp/kill_rank$killed.jsonl"
  start_job "$out"
  wait_lines "$out" 3 || { echo "FAIL: no results after 30 s"; cat "$out.log"; kill -9 $pid; exit 1; }
  victim=$(rank_pid $pid $killed)
  [[ -n "$victim" ]] || { echo "FAIL: rank $killed not found"; kill -9 $pid; exit 1; }
  t0=$(date +%s.%N)
  kill -9 $victim
  reap $pid "$t0"
  report "kill -9 of rank $killed (mpirun -np 2 -pp 2)" $rc "$took" "$(said "$out.log" "exited|killed|signal")"
  none_left "$out" || exit 1
  [[ $rc != 0 ]] || { echo "FAIL: exit status 0 after kill -9"; exit 1; }
  python3 -c "import sys; sys.exit(float(sys.argv[1]) > 10)" "$took" || { echo "FAIL: took ${took}s"; exit 1; }
  resume_and_check "$out" "kill -9 of rank $killed" || exit 1
done
echo ok
