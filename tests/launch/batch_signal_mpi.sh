#!/usr/bin/env bash
# Stop signals and kill -9 of one rank in a 2-rank pipeline batch job (see batch_signal_body.bash).
set -u
bin=$1
launch=(mpirun --oversubscribe -np 2)
layout=(-pp 2)
# mpirun forwards SIGUSR1 to every rank (it turns SIGTERM into a kill of the job), so Slurm jobs under
# mpirun ask for --signal=B:USR1 (docs/slurm.md); srun forwards SIGTERM as well.
stop_signals=(USR1 TERM)
source "$(dirname "${BASH_SOURCE[0]}")/batch_signal_body.bash"
