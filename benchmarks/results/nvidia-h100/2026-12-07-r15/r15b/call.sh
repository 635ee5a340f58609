#!/usr/bin/env bash
# Round 15's call for an H100 or H200 (no needs_h200; carry .gpu-deps; ~400 s): the fused gemv inputs
# (kernels/cuda/gemv.h: gemv_rms_norm_cuda, gemv_silu_mul_cuda) on a GPU for the first time. (1) Their test
# (bit for bit the two kernels' y) and the tests of what shares gemv.cu / the bf16 decode path; (2) batch 1 bf16
# 128/128 with CONVEYOR_FUSED_GEMV on and off, bracketed (issue 16 asks >= 229 on an H200; 216.9 there in round 10);
# (3) batch 1 FP8 once (the FP8 gemv shares the kernel: its instantiations are unchanged).
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
tests=(kernels_gemv_fused_gpu_test kernels_gemv_gpu_test kernels_fp8_gpu_test kernels_gemm_gpu_test
  stages_cuda_golden_gpu_test stages_cuda_graph_gpu_test stages_cuda_gemm_warmup_gpu_test)
call_begin r15b conveyor "${tests[@]}" || exit 1
run_tests "${tests[@]}"
mb=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
latency_ab bf16 CONVEYOR_FUSED_GEMV 1 0 1 0 -- "${mb[@]}"
latency_ab fp8 CONVEYOR_FUSED_GEMV 1 -- "${mb[@]}" --quantization fp8 --kv-cache-dtype fp8
