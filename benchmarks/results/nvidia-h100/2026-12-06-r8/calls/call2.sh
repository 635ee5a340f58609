#!/usr/bin/env bash
# Round 8, call 2 (carry .gpu-deps): after call 1's profile (the warp-specialized kernel's consumers waited for
# one producer warp's copies; every schedule spent its issue slots on the softmax's masking and scaling):
# call_min.sh races ws (a producer warpgroup now) against overlap_qreg, overlap and sync with the leaner
# softmax; Nsight Compute on overlap and ws; then call_fp8.sh (issue 15: FP8 batch 1 beside bf16 with the
# GEMM choices, and the FP8 1,000 prompts while time lasts) with the winner.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
bash benchmarks/results/nvidia-h200/next/call_min.sh
r=/tmp/wg
save() { tar czf "$OUT/wg.tgz" -C /tmp wg; echo "[$(el)] $*"; }
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
for pp in overlap ws; do
  grep -q "PASSED" $r/${pp}_test.log || continue
  CONVEYOR_WGMMA_SCHEDULE=$pp timeout 120 $ncu --set full -k regex:wgmma_.*prefill_kernel --launch-skip 70 \
    --launch-count 1 -o $r/prof_8k_$pp build/benchmarks/attention_bench > $r/ncu_$pp.log 2>&1
  $ncu -i $r/prof_8k_$pp.ncu-rep --page source --print-source sass --csv 2>/dev/null | gzip > $r/ncu_sass_$pp.csv.gz
  $ncu -i $r/prof_8k_$pp.ncu-rep --page details > $r/ncu_details_$pp.txt 2>&1
  rm -f $r/prof_8k_$pp.ncu-rep
  save "ncu $pp $(grep -E 'Duration|Issue Slots Busy' $r/ncu_details_$pp.txt | tr -s ' ' | tr '\n' ' ')"
done
BUDGET_S=$(left) t0=$(date +%s) bash benchmarks/results/nvidia-h200/next/call_fp8.sh
