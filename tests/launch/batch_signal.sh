#!/usr/bin/env bash
# Stop signals and kill -9 in a batch job on one rank (see batch_signal_body.bash).
set -u
bin=$1
launch=()
layout=()
stop_signals=(TERM)
source "$(dirname "${BASH_SOURCE[0]}")/batch_signal_body.bash"
