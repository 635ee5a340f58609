#!/usr/bin/env bash
# `conveyor config`: effective config printing and start-up validation errors with exit status 1.
set -u
bin=$1
fail=0
# expect <exit status> <expected substring> <command...>
expect() {
  local want_rc=$1 want=$2; shift 2
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [[ "$out" != *"$want"* || $rc != "$want_rc" ]]; then
    echo "FAIL: '$*' exited $rc (wanted $want_rc); wanted '$want' in:"; echo "$out"; fail=1
  fi
}
expect 0 "pipeline: 4  # --set parallel.pipeline=4" "$bin" config --print --set parallel.pipeline=4
expect 1 "must be in (0, 1]" "$bin" config --gpu-memory-utilization 2
expect 1 "data (1) x pipeline (2) x tensor (2) = 4 ranks, but the job has 2 ranks" \
  "$bin" config -pp 2 -tp 2 --world-size 2
expect 1 "did you mean '--pipeline-parallel-size'" "$bin" config --pipeline-paralel-size 2
expect 1 "did you mean 'doctor'" "$bin" docter
exit $fail
