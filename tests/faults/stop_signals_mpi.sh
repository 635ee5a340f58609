#!/usr/bin/env bash
# SIGTERM and SIGINT, once and twice, to a 2-rank pipeline batch job started by
# scripts/mpirun_relay.sh (mpirun alone turns both into "kill the job, exit 1"; see docs/faults.md),
# and SIGUSR1 to mpirun itself: status 75 and one message naming the signal the user sent, as on one
# rank; after each, the rerun completes the job as an uninterrupted run.
set -u
bin=$1
source "$(dirname "${BASH_SOURCE[0]}")/common.bash"
source "$(dirname "${BASH_SOURCE[0]}")/stop_cases.bash"
layout=(-pp 2)
launch=("$relay" --oversubscribe -np 2)
stop_case TERM 1 "stopped by SIGTERM \(relayed as SIGUSR1\): [0-9]+ of $num_requests requests are done" || exit 1
stop_case INT 1 "stopped by SIGINT \(relayed as SIGUSR2\): [0-9]+ of $num_requests requests are done" || exit 1
stop_case TERM 2 "stopped at once by a second SIGTERM \(relayed as SIGUSR1\)" || exit 1
stop_case INT 2 "stopped at once by a second SIGINT \(relayed as SIGUSR2\)" || exit 1
launch=(mpirun --oversubscribe -np 2)
stop_case USR1 1 "stopped by SIGUSR1: [0-9]+ of $num_requests requests are done" || exit 1
echo ok
