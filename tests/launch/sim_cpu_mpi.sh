#!/usr/bin/env bash
# Issue 18, 4(b) at small size: benchmarks/sim_cpu.py --size small --check runs the CPU doctor, then
# `conveyor bench throughput` at pp 1, 2, 3, 4 and pp 2 x tp 2 on the CPU backend and the simulator for
# each layout, and fails when a row's output tok/s is off by more than 20% or a stage's bubble by more
# than 5 points (each row rerun once with a fresh doctor before it counts: timings follow the host's
# load, which ctest keeps away with RUN_SERIAL), or when the simulator did not take the run's split or
# make its scheduler plans (exact, whatever the load). The timing bounds hold here for pp 1, pp 2 and
# pp 2 x tp 2; at pp 3 and pp 4 (3-4 ranks time-sliced on a 2-core runner) the simulator under-predicts
# the bubbles by 5-18 points (issue 18 open), so those two rows check the schedule only.
set -u
bin=$1
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
timeout 600 python3 "$here/../../benchmarks/sim_cpu.py" --conveyor "$bin" --size small --out "$tmp" --check --retries 1 \
  --bounded 1x1,2x1,2x2
rc=$?
[ $rc = 0 ] || { echo "FAIL: benchmarks/sim_cpu.py --size small exited $rc"; cat "$tmp"/*.log 2>/dev/null | tail -40; }
exit $rc
