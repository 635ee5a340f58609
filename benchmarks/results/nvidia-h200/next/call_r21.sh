#!/usr/bin/env bash
# Round 21's call (any GPU; carry .gpu-deps; ~650 s in full, its parts in order of worth, so BUDGET_S=555 stops
# before the stage test). Round 20's call (never run: no machine started in sessions 20 and 21) plus round 21's knob.
# Four knobs, none GPU-run, each opt-in until measured:
#   CONVEYOR_FP8_GEMM_TUNE=1   each FP8 GEMM's bucket of m times its cuBLASLt candidates (round 19's ncu at batch 256:
#                              o and down as 64 tiles of 128 x 128 on 132 SMs);
#   CONVEYOR_DECODE_MMA_4CTA=1 the FP8 decode attention at 4 CTAs an SM with Q in shared memory (3: 2,048 CTAs on
#                              396 places, six waves' time for 5.2 of work);
#   CONVEYOR_FP8_GEMV_TILES=1  the Fp8Half gemv in one row tile (q|k|v: 768 blocks on 264, not 384);
#   CONVEYOR_GEMV_PIPELINE=1   the fused gemvs (batch 1 bf16 and FP8) issue the next tile's first chunk before the
#                              barriers of this one's sums.
# (1) The FP8, attention and fused-gemv kernel tests under the defaults and under all four knobs (the new
# TimedCandidatesEqualTwinAndServeTheirBucket sets the first itself). (2) Batch 256 FP8 1024/128 under each of the
# first two, 0 / 1 / 0 / 1, the GEMM choices at logging.level=debug. (3) Batch 1 bf16 and FP8 under the pipeline knob,
# then FP8 under the tiles knob, 0 / 1 / 0 / 1 each. (4) The FP8 stage test with all four on. Then call_r19b.sh.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
call_begin r21 conveyor kernels_fp8_gpu_test kernels_attention_fp8_gpu_test kernels_gemv_fused_gpu_test \
  stages_cuda_fp8_gpu_test stages_tie_ensemble_test || exit 1
knobs=(CONVEYOR_FP8_GEMM_TUNE=1 CONVEYOR_DECODE_MMA_4CTA=1 CONVEYOR_FP8_GEMV_TILES=1 CONVEYOR_GEMV_PIPELINE=1)
run_tests kernels_fp8_gpu_test kernels_attention_fp8_gpu_test kernels_gemv_fused_gpu_test
for t in kernels_fp8_gpu_test kernels_attention_fp8_gpu_test kernels_gemv_fused_gpu_test; do
  env "${knobs[@]}" CONVEYOR_REQUIRE_GPU=1 timeout 120 build/tests/$t > "$r/$t.knobs.log" 2>&1
  save "$t, knobs on, rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$r/$t.knobs.log" | head -2 | tr '\n' ' ')"
done
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16 --quantization fp8
  --kv-cache-dtype fp8)
b256_ab() {  # `b256_ab VAR`: batch 256 FP8, 1024 in / 128 out, VAR = 0 / 1 / 0 / 1
  local i=0 v
  for v in 0 1 0 1; do
    i=$((i + 1))
    [ "$(left)" -lt 60 ] && { save "no time left for b256 $1=$v"; continue; }
    env "$1=$v" timeout 100 build/conveyor bench latency "${m[@]}" --input-len 1024 --output-len 128 \
      --batch-size 256 --num-iters-warmup 1 --num-iters 3 --set logging.level=debug \
      --output-json "$r/latency_b256.$1.$v.$i.json" > "$r/b256.$1.$v.$i.txt" 2>&1
    save "b256 fp8 $1=$v rc=$? $(grep -iE 'Avg latency' "$r/b256.$1.$v.$i.txt")"
  done
}
b256_ab CONVEYOR_FP8_GEMM_TUNE
grep -hE "e4m3->" "$r/b256.CONVEYOR_FP8_GEMM_TUNE.1.2.txt" | head -40
b256_ab CONVEYOR_DECODE_MMA_4CTA
bf16=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
latency_ab pipe_bf16 CONVEYOR_GEMV_PIPELINE 0 1 0 1 -- "${bf16[@]}"
latency_ab pipe_fp8 CONVEYOR_GEMV_PIPELINE 0 1 0 1 -- "${m[@]}" --set runtime.fp8_gemv=auto
latency_ab tiles CONVEYOR_FP8_GEMV_TILES 0 1 0 1 -- "${m[@]}" --set runtime.fp8_gemv=auto
[ "$(left)" -gt 120 ] && env "${knobs[@]}" CONVEYOR_REQUIRE_GPU=1 timeout $(($(left) - 20)) \
  build/tests/stages_cuda_fp8_gpu_test > "$r/stages_cuda_fp8_gpu_test.knobs.log" 2>&1
save "fp8 stage test, knobs on, rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$r/stages_cuda_fp8_gpu_test.knobs.log" |
  tr '\n' ' ')"
