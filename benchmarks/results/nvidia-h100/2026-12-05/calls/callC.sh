#!/usr/bin/env bash
# Round 3, device call C (carry .smolC .whl; calls A and B left the build, /tmp/smolA and /tmp/smolB): the
# SmolLM2 GGUF reassembled, then the whole GPU suite in one ctest (mpi tests included, RUN_SERIAL), then
# issue 17's layouts against one rank (issue17/run.sh without its build and ctest steps).
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
r=/tmp/c; mkdir -p $r
save() { tar czf "$OUT/c.tgz" -C /tmp c; echo "[$(el)] $*"; }
source benchmarks/results/nvidia-h200/final/gguf_from_pieces.sh > $r/gguf.sha256; cat $r/gguf.sha256
CONVEYOR_REQUIRE_GPU=1 timeout 420 ctest --test-dir build -L gpu -j3 --output-on-failure --timeout 300 > $r/ctest_gpu.log 2>&1
save "ctest -L gpu rc=$?"; grep -E "tests passed|tests failed|\*\*\*|Not Run" $r/ctest_gpu.log | head -20
[ "$(left)" -gt 120 ] && OUT=$r/i17 ISSUE17_SKIP="build ctest" timeout $(($(left) - 10)) \
  bash benchmarks/results/nvidia-h200/issue17/run.sh > $r/i17.log 2>&1
save "issue 17 layouts rc=$?"; cat $r/i17/summary.txt 2>/dev/null
