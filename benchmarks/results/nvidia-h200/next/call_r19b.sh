#!/usr/bin/env bash
# Round 19's second call (any GPU; carry .gpu-deps; ~430 s in full, BUDGET_S=300 runs (1), (3) and part of (2b)). (1) The FP8 stage test with the twin
# ensemble's escalation (tie_ensemble.h: 256 members, up to 2,048 where the closest came within one RMS move), at
# CONVEYOR_TEST_FP8_GEMV=off and =auto: round 19's first call failed off on one step (ct_kv bf16 prompt 1 step 20,
# 3.1 RMS moves, which 2,048 members flip) and passed auto. (2) Batch 1 FP8 under auto at logging.level=debug: the
# per-shape gemv / cuBLASLt race. (3) ncu --set full over the first three Fp8Half gemv launches of one batch-1 step
# (qkv, gate_up, down): memory throughput, occupancy and where the warps stall (ncu_stalls.py). (Its 8-warp A/B ran
# in round 22: no difference; the knob is gone.)
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
call_begin r19b conveyor stages_cuda_fp8_gpu_test stages_tie_ensemble_test || exit 1
for p in off auto; do
  CONVEYOR_TEST_FP8_GEMV=$p CONVEYOR_REQUIRE_GPU=1 timeout 200 build/tests/stages_cuda_fp8_gpu_test \
    > $r/stages_cuda_fp8_gpu_test.$p.log 2>&1
  save "fp8 stage test $p rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $r/stages_cuda_fp8_gpu_test.$p.log | tr '\n' ' ')"
done
grep -hE "NOT a tie|twin ensemble|forced step|teacher-forced" $r/stages_cuda_fp8_gpu_test.*.log | cut -c1-200 | sort |
  uniq -c | sort -rn | head -20
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16 --quantization fp8
  --kv-cache-dtype fp8)
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
[ "$(left)" -gt 100 ] && timeout $(($(left) - 30)) $ncu --profile-from-start off --set full -k regex:gemv_kernel \
  --launch-count 4 -o $r/gemv_full build/conveyor bench latency "${m[@]}" --set runtime.fp8_gemv=auto \
  --input-len 128 --output-len 64 --batch-size 1 --num-iters 1 --num-iters-warmup 0 --set runtime.profile_step=40 \
  > $r/ncu_full.txt 2>&1
save "ncu full rc=$?"
ncu_pages gemv
save "summary"
[ "$(left)" -gt 40 ] && timeout 100 build/conveyor bench latency "${m[@]}" --set runtime.fp8_gemv=auto --set logging.level=debug \
  --input-len 128 --output-len 128 --batch-size 1 --num-iters-warmup 2 --num-iters 5 > $r/b1_debug.txt 2>&1
save "b1 debug rc=$? $(grep -iE 'Avg latency' $r/b1_debug.txt)"
grep -E "e4m3|m<=|m=1 " $r/b1_debug.txt | head -30
