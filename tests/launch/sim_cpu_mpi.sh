#!/usr/bin/env bash
# Issue 18, 4(b) at small size: benchmarks/sim_cpu.py --size small runs the CPU doctor, then `conveyor
# bench throughput` at pp 1, 2, 3, 4 and pp 2 x tp 2 on the CPU backend and the simulator for each layout,
# and prints measured vs predicted output tok/s and per-stage bubble. It fails when the simulator did not
# take the run's split or make its scheduler plans (exact, whatever the load, every layout), and when pp 1,
# pp 2 or pp 2 x tp 2 is outside the timing bounds (20%, 5 points) after one rerun with a fresh doctor:
# those held them in every small run since the planner took doctor's timed shapes (8 runs of 2026-12-06,
# benchmarks/results/cpu/2026-12-06-r12 and -r13). pp 3 and pp 4 put 3 and 4 single-thread ranks on a
# 2-core runner's CPUs: their throughput holds 20% but the simulator under-predicts the last stage's bubble
# by 4-8 points at this size (its sharing model slows the last stage more than the host does), so their
# bounds are reported, not enforced (issue 18 stays open on them).
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
