#!/usr/bin/env bash
# Issue 18, 4(b) at small size: benchmarks/sim_cpu.py --size small runs the CPU doctor, then `conveyor
# bench throughput` at pp 1, 2, 3, 4 and pp 2 x tp 2 on the CPU backend and the simulator for each layout,
# and prints measured vs predicted output tok/s and per-stage bubble. It fails when the simulator did not
# take the run's split or make its scheduler plans (exact, whatever the load). The timing bounds (20%,
# 5 points) are not enforced here: they follow the host's load, and on a 2-core runner with 2-4
# single-thread ranks the simulator misses them whenever anything else runs; on a quiet host a layout holds
# them in 31-36 of 36 full-size runs, and 2 of the 4 runs of 2026-12-06 missed one layout each
# (benchmarks/results/cpu/2026-12-06-r10).
set -u
bin=$1
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
timeout 600 python3 "$here/../../benchmarks/sim_cpu.py" --conveyor "$bin" --size small --out "$tmp" --check --retries 1 \
  --bounded none
rc=$?
[ $rc = 0 ] || { echo "FAIL: benchmarks/sim_cpu.py --size small exited $rc"; cat "$tmp"/*.log 2>/dev/null | tail -40; }
exit $rc
