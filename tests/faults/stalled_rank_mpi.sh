#!/usr/bin/env bash
# SIGSTOP of one rank of a 2-rank pipeline batch job (mpirun -np 2, -pp 2, --watchdog-timeout 8), the
# non-leader and then the leader: the other rank's watchdog fires and its message names the stopped
# rank, its host, stage and tensor rank; it is the only watchdog message (the stopped rank, woken by
# mpirun, stays quiet); every rank is gone within the timeout + 5 s; the rerun completes the job as
# an uninterrupted run.
set -u
bin=$1
source "$(dirname "${BASH_SOURCE[0]}")/common.bash"
layout=(-pp 2 --watchdog-timeout 8)
launch=(mpirun --oversubscribe -np 2)
host=$(hostname)
for stopped in 1 0; do
  other=$(( 1 - stopped ))
  out="$tmp/stop_rank$stopped.jsonl"
  start_job "$out"
  wait_lines "$out" 2 || { echo "FAIL: no results after 30 s"; cat "$out.log"; kill -9 $pid; exit 1; }
  victim=$(rank_pid $pid $stopped)
  [[ -n "$victim" ]] || { echo "FAIL: rank $stopped not found"; kill -9 $pid; exit 1; }
  t0=$(date +%s.%N)
  kill -STOP $victim
  ( sleep 30; kill -9 $pid $victim 2>/dev/null ) &  # never hang the suite
  guard=$!
  reap $pid "$t0"
  kill $guard 2>/dev/null
  kill -9 $victim 2>/dev/null
  msg=$(said "$out.log" "no progress")
  report "SIGSTOP of rank $stopped (mpirun -np 2 -pp 2, watchdog 8 s)" $rc "$took" "$msg"
  none_left "$out" || exit 1
  [[ $rc != 0 ]] || { echo "FAIL: exit status 0 with a stopped rank"; exit 1; }
  python3 -c "import sys; sys.exit(float(sys.argv[1]) > 13)" "$took" || { echo "FAIL: took ${took}s (timeout 8 s + 5)"; exit 1; }
  # One diagnosis, from the other rank, naming the stopped one; the stopped rank, if it speaks at all
  # after mpirun wakes it, says that it was the one stopped.
  python3 - "$out.log" "$other" "$stopped" "$host" <<'PY' || { cat "$out.log"; exit 1; }
import sys
log, other, stopped, host = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
lines = [l for l in open(log) if "no progress" in l]
me = lambda r: f"rank {r} (host {host}, stage {r}, tensor rank 0)"
blame = [l for l in lines if f"{me(other)}: no progress" in l and f"{me(stopped)} has sent no heartbeat" in l]
assert len(blame) == 1, f"FAIL: want one message from rank {other} naming rank {stopped} and its host"
rest = [l for l in lines if l not in blame and f"{me(stopped)}: this rank itself was stopped" not in l]
assert not rest, f"FAIL: another watchdog message: {rest}"
PY
  resume_and_check "$out" "SIGSTOP of rank $stopped" || exit 1
done
echo ok
