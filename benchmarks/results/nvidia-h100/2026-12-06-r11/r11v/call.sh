#!/usr/bin/env bash
# Round 11's smallest call (what was left of the budget after the failed starts; carry .gpu-deps; ~300 s): the
# fused FP8 input quantizers checked (their test against the two-kernel path; the FP8 stage test against the
# CPU twin with them on), then FP8 batch 1 128/128 with them and without, as time allows.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
tests=(kernels_fp8_fused_input_gpu_test stages_cuda_fp8_gpu_test)
call_begin r11v conveyor "${tests[@]}" || exit 1
for t in "${tests[@]}"; do
  CONVEYOR_FUSED_FP8_INPUT=1 CONVEYOR_REQUIRE_GPU=1 timeout 90 build/tests/$t > $r/$t.log 2>&1
  save "$t rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $r/$t.log | head -2 | tr '\n' ' ')"
done
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16 --quantization fp8
  --kv-cache-dtype fp8)
for f in 1 0; do
  [ "$(left)" -lt 55 ] && { save "no time left for b1 fp8 fused=$f"; continue; }
  CONVEYOR_FUSED_FP8_INPUT=$f timeout $(($(left) - 5)) build/conveyor bench latency "${m[@]}" --input-len 128 \
    --output-len 128 --batch-size 1 --num-iters-warmup 3 --num-iters 10 --output-json $r/latency_b1.fp8.fused$f.json \
    > $r/b1_fp8_fused$f.txt 2>&1
  save "b1 fp8 fused=$f rc=$? $(grep -iE 'Avg latency' $r/b1_fp8_fused$f.txt)"
done
