#!/usr/bin/env bash
# Round 8, call 1 (carry .gpu-deps): call_min.sh (the three wgmma schedules raced after their twin tests, the
# FP8-cache test and doctor with the winner), then the whole tree built and every GPU test that one GPU can
# run (the CUDA code was refactored in e5fa5cc after round 7), the shared-GPU MPI tests included.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
bash benchmarks/results/nvidia-h200/next/call_min.sh
r=/tmp/wg
save() { tar czf "$OUT/wg.tgz" -C /tmp wg; echo "[$(el)] $*"; }
# Nsight Compute on the first 8k launch of the wgmma kernel (after 35 launches each of 2k and 4k), for the
# default schedule and for ws when its test passed: where the kernel stalls (--set full: warp states and
# per-instruction samples).
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
for pp in overlap ws; do
  [ $pp = ws ] && ! grep -q "PASSED" $r/ws_test.log && continue
  CONVEYOR_WGMMA_SCHEDULE=$pp timeout 120 $ncu --set full -k regex:wgmma_.*prefill_kernel --launch-skip 70 \
    --launch-count 1 -o $r/prof_8k_$pp build/benchmarks/attention_bench > $r/ncu_$pp.log 2>&1; save "ncu $pp rc=$?"
  $ncu -i $r/prof_8k_$pp.ncu-rep --page details > $r/ncu_details_$pp.txt 2>&1
  $ncu -i $r/prof_8k_$pp.ncu-rep --page source --print-source sass --csv 2>/dev/null | gzip > $r/ncu_sass_$pp.csv.gz
  grep -E "Duration|Compute \(SM\) Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|No Eligible" \
    $r/ncu_details_$pp.txt | head -12
  save "ncu report $pp"
done
ninja -C build -j16 > $r/build_all.log 2>&1; save "build all rc=$?"
[ "$(left)" -gt 90 ] && CONVEYOR_REQUIRE_GPU=1 timeout $(($(left) - 15)) ctest --test-dir build -L gpu \
  -E "kernels_attention_(fp8_)?gpu_test|nccl_communicator|smollm2" -j3 --output-on-failure --timeout 200 > $r/ctest_gpu.log 2>&1
save "ctest -L gpu rc=$? $(grep -E 'tests passed|tests failed' $r/ctest_gpu.log)"
grep -E "Failed|\*\*\*|Passed" $r/ctest_gpu.log | head -30
