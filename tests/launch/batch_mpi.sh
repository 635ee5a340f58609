#!/usr/bin/env bash
# Batch job on a 2-rank pipeline under mpirun (see batch_body.bash): the same files as on one rank.
set -u
bin=$1
launch=(mpirun --oversubscribe -np 2)
layout=(-pp 2)
source "$(dirname "${BASH_SOURCE[0]}")/batch_body.bash"
