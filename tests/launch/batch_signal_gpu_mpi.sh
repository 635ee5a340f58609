#!/usr/bin/env bash
# A 2-stage pipeline batch job on CUDA ranks (one GPU shared when there is one): SIGUSR1 stops it
# resumably, kill -9 of the last stage and of the leader ends every rank; each rerun completes the
# job with every custom_id written exactly once (batch_signal_body.bash).
set -u
bin=$1
source "$(dirname "${BASH_SOURCE[0]}")/gpu.bash"
launch=(mpirun --oversubscribe -np 2)
layout=(-pp 2 --set runtime.backend=cuda)
stop_signals=(USR1)
kill_ranks=(1 0)
same_texts=0
# 256 requests took 2 s on an H200 (2026-12-05): SIGUSR1, sent to mpirun with 18 results written,
# came after the last; 4096 give the relay ~30 s.
n_requests=4096
source "$(dirname "${BASH_SOURCE[0]}")/batch_signal_body.bash"
