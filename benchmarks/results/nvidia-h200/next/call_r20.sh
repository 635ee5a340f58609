#!/usr/bin/env bash
# Round 20's call (any GPU; carry .gpu-deps; ~500 s in full; its parts in order of worth, so BUDGET_S=300 runs (1)-(2)).
# Three knobs of the twentieth session, never GPU-run, each opt-in until measured:
#   CONVEYOR_FP8_GEMM_TUNE=1   each FP8 GEMM's bucket of m times its cuBLASLt candidates (round 19's ncu at batch 256:
#                              o and down as 64 tiles of 128 x 128 on 132 SMs);
#   CONVEYOR_DECODE_MMA_4CTA=1 the FP8 decode attention at 4 CTAs an SM (3: 2,048 CTAs on 396 places, six waves'
#                              time for 5.2 of work);
#   CONVEYOR_FP8_GEMV_TILES=1  the Fp8Half gemv in one row tile (q|k|v: 768 blocks on 264, not 384).
# (1) The FP8 kernel tests under the defaults and under all three knobs (the new TimedCandidatesEqualTwinAndServe-
# TheirBucket sets the first itself). (2) Batch 256 FP8 1024/128 under each of the first two, 0 / 1 / 0 / 1, the GEMM
# choices at logging.level=debug. (3) Batch 1 FP8 under the third, 0 / 1 / 0 / 1. (4) The FP8 stage test with all
# three on. Then call_r19b.sh with what is left.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
call_begin r20 conveyor kernels_fp8_gpu_test kernels_attention_fp8_gpu_test stages_cuda_fp8_gpu_test \
  stages_tie_ensemble_test || exit 1
knobs=(CONVEYOR_FP8_GEMM_TUNE=1 CONVEYOR_DECODE_MMA_4CTA=1 CONVEYOR_FP8_GEMV_TILES=1)
run_tests kernels_fp8_gpu_test kernels_attention_fp8_gpu_test
for t in kernels_fp8_gpu_test kernels_attention_fp8_gpu_test; do
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
latency_ab tiles CONVEYOR_FP8_GEMV_TILES 0 1 0 1 -- "${m[@]}" --set runtime.fp8_gemv=auto
[ "$(left)" -gt 120 ] && env "${knobs[@]}" CONVEYOR_REQUIRE_GPU=1 timeout $(($(left) - 20)) \
  build/tests/stages_cuda_fp8_gpu_test > "$r/stages_cuda_fp8_gpu_test.knobs.log" 2>&1
save "fp8 stage test, knobs on, rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$r/stages_cuda_fp8_gpu_test.knobs.log" |
  tr '\n' ' ')"
