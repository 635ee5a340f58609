#!/usr/bin/env bash
# Round 5, device call C (carry .smolC .whl; calls A and B left the build, /tmp/smolA and /tmp/smolB): the SmolLM2
# GGUF reassembled, the whole GPU suite in one ctest (issue 17: np 2 and 4 on the one GPU included), the
# signal and watchdog tests after it, verbose: their "mpirun forwards ..." / NOTE lines and the watchdog's exit
# times.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
r=/tmp/c; mkdir -p $r
save() { tar czf "$OUT/c.tgz" -C /tmp c; echo "[$(el)] $*"; }
source benchmarks/results/nvidia-h200/final/gguf_from_pieces.sh > $r/gguf.sha256; cat $r/gguf.sha256
CONVEYOR_REQUIRE_GPU=1 timeout 430 ctest --test-dir build -L gpu -E "cli_(batch_signal|watchdog)_gpu_mpi" -j3 \
  --output-on-failure --timeout 300 > $r/ctest_gpu.log 2>&1
save "ctest -L gpu (but the two below) rc=$?"; grep -E "tests passed|tests failed|\*\*\*|Not Run" $r/ctest_gpu.log | head -20
[ "$(left)" -gt 60 ] && CONVEYOR_REQUIRE_GPU=1 timeout $(($(left) - 8)) ctest --test-dir build \
  -R "cli_(batch_signal|watchdog)_gpu_mpi" -V --timeout 200 > $r/ctest_signal_watchdog_V.log 2>&1
save "signal/watchdog -V rc=$?"; grep -E "forwards|NOTE|ok:|FAIL|exited|Passed|Failed" $r/ctest_signal_watchdog_V.log | head -30
