#!/usr/bin/env bash
# conveyor perplexity on a 2-stage pipeline under mpirun: the same numbers as one rank and as
# transformers; see perplexity_body.bash.
set -u
bin=$1
launch=(mpirun --oversubscribe -np 2)
layout=(-pp 2)
source "$(dirname "${BASH_SOURCE[0]}")/perplexity_body.bash"
