#!/usr/bin/env bash
# Round 11, warm after call_r11h.sh (its build; ~250 s): the kernel tests with PDL signalled after the wait
# (CONVEYOR_PDL=1; round 11 moved every signal after its kernel's wait), then the FP8 1,000 prompts at
# max_num_seqs 512 beside call_r11h.sh's auto batch (the simulator: +7% on an H100, +10.8% on an H200).
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
tests=(kernels_gemv_gpu_test kernels_rms_norm_gpu_test kernels_silu_mul_gpu_test kernels_rope_gpu_test
  kernels_fp8_fused_input_gpu_test stages_cuda_graph_gpu_test)
call_begin r11h2 conveyor "${tests[@]}" || exit 1
for t in "${tests[@]}"; do
  CONVEYOR_FUSED_FP8_INPUT=1 CONVEYOR_PDL=1 CONVEYOR_REQUIRE_GPU=1 timeout 120 build/tests/$t > $r/${t}_pdl.log 2>&1
  save "$t PDL=1 rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $r/${t}_pdl.log | head -2 | tr '\n' ' ')"
done
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16 --quantization fp8
  --kv-cache-dtype fp8 --input-len 1024 --output-len 1024 --num-prompts 1000)
CONVEYOR_FUSED_FP8_INPUT=1 timeout $(($(left) - 10)) build/conveyor bench throughput "${m[@]}" --max-num-seqs 512 \
  --output-json $r/throughput.fp8.seqs_512.json > $r/t1000_fp8_seqs_512.txt 2>&1
save "fp8 1000 prompts max_num_seqs 512 rc=$? $(grep -iE 'Throughput|TTFT|preempt' $r/t1000_fp8_seqs_512.txt | tr '\n' ' ' | cut -c1-300)"
