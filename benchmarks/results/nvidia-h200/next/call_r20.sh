#!/usr/bin/env bash
# Round 20's call (any GPU; carry .gpu-deps; ~480 s in full, BUDGET_S=300 runs (1)-(2)). (1) The FP8 kernel tests,
# with the new TimedCandidatesEqualTwinAndServeTheirBucket (CONVEYOR_FP8_GEMM_TUNE=1: each FP8 GEMM's bucket of m
# times its cuBLASLt candidates, as GemmRunner does for bf16; round 19's ncu at batch 256 ran o and down as 64 tiles
# on 132 SMs). (2) Batch 256 FP8, 1024 in / 128 out, CONVEYOR_FP8_GEMM_TUNE 0 / 1 / 0 / 1, and the choices at
# logging.level=debug. (2b) The FP8 decode attention at 4 CTAs an SM (CONVEYOR_DECODE_MMA_4CTA=1): its tests and
# batch 256 0 / 1 / 0 / 1 (round 19: 2,048 CTAs on 3 x 132 places, the last wave 17% full). (3) The FP8 stage test
# under the default (auto) with the tuning on. Then round 19's second
# call (call_r19b.sh) with what is left.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
call_begin r20 conveyor kernels_fp8_gpu_test kernels_attention_fp8_gpu_test stages_cuda_fp8_gpu_test \
  stages_tie_ensemble_test || exit 1
run_tests kernels_fp8_gpu_test
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16 --quantization fp8
  --kv-cache-dtype fp8)
i=0
for v in 0 1 0 1; do
  i=$((i + 1))
  [ "$(left)" -lt 60 ] && { save "no time left for b256 tune=$v"; continue; }
  CONVEYOR_FP8_GEMM_TUNE=$v timeout 100 build/conveyor bench latency "${m[@]}" --input-len 1024 --output-len 128 \
    --batch-size 256 --num-iters-warmup 1 --num-iters 3 --set logging.level=debug \
    --output-json "$r/latency_b256.tune$v.$i.json" > "$r/b256_tune$v.$i.txt" 2>&1
  save "b256 fp8 CONVEYOR_FP8_GEMM_TUNE=$v rc=$? $(grep -iE 'Avg latency' "$r/b256_tune$v.$i.txt")"
done
grep -hE "e4m3->" "$r/b256_tune1.2.txt" | head -40
# The FP8 decode attention at 4 CTAs an SM (head_dim 128; 3 by default): its tests, then batch 256 0 / 1 / 0 / 1.
CONVEYOR_DECODE_MMA_4CTA=1 run_tests kernels_attention_fp8_gpu_test
i=0
for v in 0 1 0 1; do
  i=$((i + 1))
  [ "$(left)" -lt 60 ] && { save "no time left for b256 4cta=$v"; continue; }
  CONVEYOR_DECODE_MMA_4CTA=$v timeout 100 build/conveyor bench latency "${m[@]}" --input-len 1024 --output-len 128 \
    --batch-size 256 --num-iters-warmup 1 --num-iters 3 --output-json "$r/latency_b256.4cta$v.$i.json" \
    > "$r/b256_4cta$v.$i.txt" 2>&1
  save "b256 fp8 CONVEYOR_DECODE_MMA_4CTA=$v rc=$? $(grep -iE 'Avg latency' "$r/b256_4cta$v.$i.txt")"
done
[ "$(left)" -gt 120 ] && CONVEYOR_FP8_GEMM_TUNE=1 CONVEYOR_REQUIRE_GPU=1 timeout $(($(left) - 20)) \
  build/tests/stages_cuda_fp8_gpu_test > "$r/stages_cuda_fp8_gpu_test.tune.log" 2>&1
save "fp8 stage test, tuning on, rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$r/stages_cuda_fp8_gpu_test.tune.log" |
  tr '\n' ' ')"
