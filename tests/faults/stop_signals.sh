#!/usr/bin/env bash
# SIGTERM and SIGINT, once and twice, in the middle of a one-rank batch job: once, the job stops
# admitting, flushes and exits 75 naming the signal and how many are done; twice, it exits 75 at once
# saying so (never killed without a word). After each, the rerun completes the job as an
# uninterrupted run: every custom_id once, same texts.
set -u
bin=$1
source "$(dirname "${BASH_SOURCE[0]}")/common.bash"
source "$(dirname "${BASH_SOURCE[0]}")/stop_cases.bash"
stop_case TERM 1 "stopped by SIGTERM: [0-9]+ of $num_requests requests are done" || exit 1
stop_case INT 1 "stopped by SIGINT: [0-9]+ of $num_requests requests are done" || exit 1
stop_case TERM 2 "stopped at once by a second SIGTERM: every result written so far is kept" || exit 1
stop_case INT 2 "stopped at once by a second SIGINT: every result written so far is kept" || exit 1
echo ok
