#!/usr/bin/env bash
# Runs `mpirun "$@"` so that a stop signal sent to this script reaches conveyor as what it was. Open
# MPI 4.1's mpirun does not forward SIGTERM or SIGINT: it sends SIGTERM to every rank, kills the job
# and exits 1 whatever the ranks return (and a second SIGTERM ends it without a word). It does forward
# SIGUSR1 and SIGUSR2 (Debian 12's 4.1.4 does; docs/faults.md names a build that forwards nothing). So mpirun runs in the background, SIGTERM is relayed as SIGUSR1 and SIGINT as
# SIGUSR2, CONVEYOR_SIGNAL_RELAY (exported to every rank) tells conveyor what they stand for, and the
# script exits with mpirun's status: 75 after a stop, like a direct run or srun.
#   usage: scripts/mpirun_relay.sh [mpirun options] conveyor generate ...
set -u
export CONVEYOR_SIGNAL_RELAY="USR1=TERM,USR2=INT"
mpirun -x CONVEYOR_SIGNAL_RELAY "$@" &
pid=$!
trap 'kill -USR1 $pid 2>/dev/null' TERM
trap 'kill -USR2 $pid 2>/dev/null' INT
rc=0
while :; do
  wait $pid
  rc=$?
  kill -0 $pid 2>/dev/null || break  # a trapped signal cut the wait short while mpirun still runs
done
# When a trap cut the last wait short, mpirun's own status is still to be collected.
wait $pid 2>/dev/null
last=$?
[[ $last == 127 ]] || rc=$last
exit $rc
