#!/usr/bin/env bash
# Round 15's second call (H100 or H200; carry .gpu-deps; ~450 s): why the fused gemv inputs made batch 1 bf16 3.5%
# slower on an H100 (r15b). Batch 1 bf16 128/128 two kernels / fused (a grid of two blocks per SM taking the tiles in
# turn) / fused with a block per tile (XEXP_GRID_ALL: every block makes x) / fused with the first tile prefetched
# into L2 before the PDL wait (XEXP_PREFETCH), then an ncu step (kernel times alone) with and without.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
call_begin r15c conveyor kernels_gemv_fused_gpu_test || exit 1
run_tests kernels_gemv_fused_gpu_test
XEXP_PREFETCH=1 CONVEYOR_REQUIRE_GPU=1 timeout 120 build/tests/kernels_gemv_fused_gpu_test > $r/fused_prefetch.log 2>&1
save "fused test with XEXP_PREFETCH rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $r/fused_prefetch.log | head -2 | tr '\n' ' ')"
mb=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
latency_ab two CONVEYOR_FUSED_GEMV 0 -- "${mb[@]}"
latency_ab fused CONVEYOR_FUSED_GEMV 1 -- "${mb[@]}"
XEXP_GRID_ALL=1 latency_ab all CONVEYOR_FUSED_GEMV 1 -- "${mb[@]}"
XEXP_PREFETCH=1 latency_ab pre CONVEYOR_FUSED_GEMV 1 -- "${mb[@]}"
latency_ab two2 CONVEYOR_FUSED_GEMV 0 -- "${mb[@]}"
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
for f in 0 1; do
  [ "$(left)" -lt 70 ] && { save "no time left for ncu fused=$f"; continue; }
  CONVEYOR_FUSED_GEMV=$f timeout 60 $ncu --profile-from-start off --clock-control none --cache-control none \
    --metrics gpu__time_duration.sum --csv --log-file $r/ncu_b1_fused$f.csv build/conveyor bench latency "${mb[@]}" \
    --input-len 128 --output-len 64 --batch-size 1 --num-iters 1 --num-iters-warmup 0 --set runtime.profile_step=40 \
    > $r/ncu_b1_fused$f.txt 2>&1
  python3 benchmarks/ncu_breakdown.py $r/ncu_b1_fused$f.csv --json $r/ncu_b1_fused$f.json > $r/breakdown_fused$f.txt 2>&1
  gzip -f $r/ncu_b1_fused$f.csv
  save "ncu fused=$f: $(head -14 $r/breakdown_fused$f.txt | tr -s ' ' | tr '\n' ' ' | cut -c1-700)"
done
