#!/usr/bin/env bash
# Issue 18, 4(b) at small size: benchmarks/sim_cpu.py --size small runs the CPU doctor, then `conveyor
# bench throughput` at pp 1, 2, 3, 4 and pp 2 x tp 2 on the CPU backend and the simulator for each layout,
# and prints measured vs predicted output tok/s and per-stage bubble. It fails when the simulator did not
# take the run's split or make its scheduler plans (exact, whatever the load, every layout), and when pp 1,
# pp 2 or pp 2 x tp 2 is outside the timing bounds (20%, 5 points) after two reruns, each with a fresh
# doctor: over the 15 runs of 2026-12-06 re-simulated with today's simulator (benchmarks/resim_cpu.py on
# benchmarks/results/cpu/2026-12-06-r12 and -r13) those held both bounds in 15 / 13 / 15 of 15; a miss came
# from the host (a run where something else took rank 0's CPU). pp 3 and pp 4 put 3 and 4 single-thread
# ranks on a 2-core runner's CPUs: they held 11 and 4 of 15 (pp 4's stages idle 3-10 points more than
# simulated: the ring probe's speeds beyond the CPUs are lower than the runs meet), so their bounds are
# reported, not enforced, and issue 18 stays open on them.
set -u
bin=$1
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
timeout 600 python3 "$here/../../benchmarks/sim_cpu.py" --conveyor "$bin" --size small --out "$tmp" --check --retries 2 \
  --bounded 1x1,2x1,2x2
rc=$?
[ $rc = 0 ] || { echo "FAIL: benchmarks/sim_cpu.py --size small exited $rc"; cat "$tmp"/*.log 2>/dev/null | tail -40; }
exit $rc
