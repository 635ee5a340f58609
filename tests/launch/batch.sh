#!/usr/bin/env bash
# Batch job on one rank (see batch_body.bash).
set -u
bin=$1
launch=()
layout=()
source "$(dirname "${BASH_SOURCE[0]}")/batch_body.bash"
