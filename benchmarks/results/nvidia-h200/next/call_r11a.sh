#!/usr/bin/env bash
# Round 11's first call (needs_h200: Llama-3-70B with FP8 weights and KV does not fit 78 GiB; carry .gpu-deps;
# ~560 s). Round 10's 70B run spent 293 s making its dummy weights (a fresh host buffer per linear, page-faulted
# on one thread); WeightBank now reuses them (round 10, after its last call). (1) build conveyor only; (2) the 70B
# FP8 1,000 prompts 1024/1024 with the start-up table (>= 150 sequences of 2,048) and its start time, against the
# simulator's 2,200 tok/s from round 10's H200 doctor (configs/clusters/h200-1-r10.yaml with precision: fp8;
# 2,382 before round 12): at that rate the run takes ~430 s, so nothing else fits this call. call_r11b.sh runs the GPU tests that load
# weights through CudaOps::adopt / adopt_fp8 (the reuse is in both) on the warm machine. Round 11 adds the fused
# FP8 input quantizers (rms_norm / silu_mul writing the linears' codes), their test first.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
call_begin r11a conveyor kernels_fp8_fused_input_gpu_test || exit 1
# The fused FP8 input quantizers (round 11) against the two kernels they replace: if they
# fail, the 70B runs without them (CONVEYOR_FUSED_FP8_INPUT=0, round 10's path). Round 11's H100 passed it.
CONVEYOR_REQUIRE_GPU=1 timeout 60 build/tests/kernels_fp8_fused_input_gpu_test > $r/fused_test.log 2>&1
rc=$?; save "fused input test rc=$rc $(grep -E '^\[  (PASSED|FAILED) ' $r/fused_test.log | tr '\n' ' ')"
[ $rc = 0 ] || { export CONVEYOR_FUSED_FP8_INPUT=0; grep -m3 -B2 -A6 'Failure' $r/fused_test.log; }
m70=(--load-format dummy --set model.config=configs/models/llama-3-70b.yaml --dtype bfloat16 --quantization fp8
  --kv-cache-dtype fp8)
timeout $(($(left) - 12)) build/conveyor bench throughput "${m70[@]}" --input-len 1024 --output-len 1024 \
  --num-prompts 1000 --output-json $r/throughput.70b.fp8.json > $r/t1000_70b_fp8.txt 2>&1
save "70b 1000 prompts fp8 rc=$? $(grep -iE 'Throughput|TTFT|batch from memory' $r/t1000_70b_fp8.txt | tr '\n' ' ' | cut -c1-500)"
grep -E "^[0-9]{2}:[0-9]{2}" $r/t1000_70b_fp8.txt | cut -c1-140 | head -8
