#!/usr/bin/env bash
# Round 22's call (any GPU; carry .gpu-deps; ~520 s in full, its parts in order of worth). Round 21 made the
# pipelined fused gemv and the Fp8Half gemv's one row tile the rule (batch 1 FP8 0.5287 -> 0.4999 s on an H100);
# two switches are left to decide, on a decode-heavy workload this time (round 21's 1024/128 was ~70% prefill):
#   CONVEYOR_FP8_GEMM_TUNE=1   each FP8 GEMM's bucket of m times its cuBLASLt candidates (the fp32-out plans only:
#                              the outer-vector-scaled one has a single algorithm on an H100);
#   CONVEYOR_DECODE_MMA_4CTA=1 the FP8 decode attention at 4 CTAs an SM with Q in shared memory.
# (1) The FP8 stage test under the new defaults (the rule changes are bit-identical sums, but it never ran with
# them). (2) Batch 256 FP8 128 in / 512 out under each switch, 0 / 1 / 0 / 1. (3) Batch 1 bf16 with the fused gemv
# (CONVEYOR_FUSED_GEMV, pipelined since round 21; 3-4% slower in round 15 before it), 0 / 1 / 0 / 1.
# A switch that wins becomes the rule; one that does not is removed. Then call_r19b.sh.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
call_begin r22 conveyor stages_cuda_fp8_gpu_test stages_tie_ensemble_test || exit 1
CONVEYOR_TEST_FP8_GEMV=auto CONVEYOR_REQUIRE_GPU=1 timeout 200 build/tests/stages_cuda_fp8_gpu_test \
  > "$r/stages_cuda_fp8_gpu_test.log" 2>&1
save "fp8 stage test rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$r/stages_cuda_fp8_gpu_test.log" | tr '\n' ' ')"
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16 --quantization fp8
  --kv-cache-dtype fp8)
b256_ab() {  # `b256_ab VAR`: batch 256 FP8, 128 in / 512 out, VAR = 0 / 1 / 0 / 1
  local i=0 v
  for v in 0 1 0 1; do
    i=$((i + 1))
    [ "$(left)" -lt 60 ] && { save "no time left for b256 $1=$v"; continue; }
    env "$1=$v" timeout 100 build/conveyor bench latency "${m[@]}" --input-len 128 --output-len 512 \
      --batch-size 256 --num-iters-warmup 1 --num-iters 3 --set logging.level=debug \
      --output-json "$r/latency_b256.$1.$v.$i.json" > "$r/b256.$1.$v.$i.txt" 2>&1
    save "b256 fp8 $1=$v rc=$? $(grep -iE 'Avg latency' "$r/b256.$1.$v.$i.txt")"
  done
}
b256_ab CONVEYOR_DECODE_MMA_4CTA
b256_ab CONVEYOR_FP8_GEMM_TUNE
bf16=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
latency_ab fused_bf16 CONVEYOR_FUSED_GEMV 0 1 0 1 -- "${bf16[@]}"
