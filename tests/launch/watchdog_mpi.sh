#!/usr/bin/env bash
# The watchdog on a 2-stage pipeline (watchdog_body.bash) on whatever backend `auto` picks.
set -u
bin=$1
cases=(STOP:1 KILL:1)
backend=()
source "$(dirname "${BASH_SOURCE[0]}")/watchdog_body.bash"
