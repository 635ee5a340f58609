#!/usr/bin/env bash
# Issue 18, 4(b) at small size: benchmarks/sim_cpu.py --size small runs the CPU doctor, then `conveyor
# bench throughput` at pp 1, 2, 3, 4 and pp 2 x tp 2 on the CPU backend and the simulator for each layout,
# and prints measured vs predicted output tok/s and per-stage bubble. It fails when the simulator did not
# take the run's split or make its scheduler plans (exact, whatever the load, every layout), and when pp 1,
# pp 2, pp 3 or pp 2 x tp 2 is outside the timing bounds (20%, 5 points) after four reruns, each with a fresh
# doctor (two until round 19, when two of four CI runs failed on one row after two: on this 2-vCPU VM three doctors
# run back to back differ by 20-70% in their GEMM, attention and ring speeds, and a row's reruns missed both ways,
# -22% then +28%). On their first try, in the 15 small runs of benchmarks/results/cpu/2026-12-06-r14 (the
# simulator's run queues taking turns of doctor's measured slice), those held both bounds in 15 / 10 / 12 / 11 of
# 15; the misses came from the host (a run or the doctor's ring probe something else slowed) or one stage's bubble.
# pp 4 puts 4 single-thread ranks on a 2-core runner's CPUs and held 11 of 15 (misses of 5.2-6.7 points): its
# bounds are reported, not enforced, and issue 18 stays open on it.
set -u
bin=$1
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
timeout 840 python3 "$here/../../benchmarks/sim_cpu.py" --conveyor "$bin" --size small --out "$tmp" --check \
  --retries 4 --bounded 1x1,2x1,3x1,2x2
rc=$?
[ $rc = 0 ] || { echo "FAIL: benchmarks/sim_cpu.py --size small exited $rc"; cat "$tmp"/*.log 2>/dev/null | tail -40; }
exit $rc
