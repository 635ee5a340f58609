#!/usr/bin/env bash
# conveyor perplexity on one rank (CPU, fp32) against transformers; see perplexity_body.bash.
set -u
bin=$1
launch=()
layout=()
source "$(dirname "${BASH_SOURCE[0]}")/perplexity_body.bash"
