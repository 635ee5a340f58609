#!/usr/bin/env bash
# The watchdog on a 2-stage pipeline of CUDA ranks (both on one GPU when there is one): SIGSTOP of
# the last stage, kill -9 of the last stage and of the leader (watchdog_body.bash).
set -u
bin=$1
source "$(dirname "${BASH_SOURCE[0]}")/gpu.bash"
cases=(STOP:1 KILL:1 KILL:0)
# Small batches and frequent progress lines: a GPU runs the tiny model fast.
backend=(--set runtime.backend=cuda --max-num-seqs 4 --set logging.progress_interval=0.5)
source "$(dirname "${BASH_SOURCE[0]}")/watchdog_body.bash"
