#!/usr/bin/env bash
# Issue 18, 4(b) at small size: benchmarks/sim_cpu.py --size small runs the CPU doctor, then `conveyor
# bench throughput` at pp 1, 2, 3, 4 and pp 2 x tp 2 on the CPU backend and the simulator for each layout,
# and prints measured vs predicted output tok/s and per-stage bubble against issue 18's bounds (20%, 5 points).
# It fails when the simulator did not take the run's split or make its scheduler plans (exact, whatever the
# load, every layout), and when a layout's timing is grossly off (predicted / measured outside [1/2, 2], a bubble
# off by more than 15 points) after four reruns, each with a fresh doctor. The 20% / 5-point bounds were enforced
# here at pp 1, 2, 3 and pp 2 x tp 2 until the twentieth session; they are the benchmark's (benchmarks/sim_cpu.py
# full runs, committed), not a timed test's: on the 2-vCPU VMs one pp 1 run measured 65.6 and the next 108.9 tok/s
# minutes apart, and one CI run's five doctors predicted pp 2 x tp 2 at x1.26, 1.42, 0.74, 1.79 and 1.47 of its
# runs (benchmarks/results/cpu/2026-12-07-r20).
set -u
bin=$1
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
timeout 840 python3 "$here/../../benchmarks/sim_cpu.py" --conveyor "$bin" --size small --out "$tmp" \
  --retries 4 --check-gross
rc=$?
[ $rc = 0 ] || { echo "FAIL: benchmarks/sim_cpu.py --size small exited $rc"; cat "$tmp"/*.log 2>/dev/null | tail -40; }
exit $rc
