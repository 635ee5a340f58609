#!/usr/bin/env bash
# Round 15's third call (H100 or H200; carry .gpu-deps; ~450 s): the decode shapes' GEMM races timed with the L2
# flushed before each run (launch_timer.h, ColdL2) against the warm races (CONVEYOR_COLD_GEMM_TUNE=0): the GPU
# tests of the runners and of what uses them; the GEMM choices each way (logging.level=debug, a short run); batch 1
# bf16 and FP8 128/128 bracketed.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
tests=(kernels_gemm_gpu_test stages_cuda_fp8_gpu_test stages_cuda_gemm_warmup_gpu_test stages_cuda_step_alloc_gpu_test
  stages_cuda_graph_gpu_test stages_cuda_memory_gpu_test stages_cuda_golden_gpu_test)
call_begin r15d conveyor "${tests[@]}" || exit 1
run_tests "${tests[@]}"
mb=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
m8=("${mb[@]}" --quantization fp8 --kv-cache-dtype fp8)
for c in 1 0; do  # CONVEYOR_COLD_GEMM_TUNE=1 turns the cold races on
  for p in bf16 fp8; do
    a=("${mb[@]}"); [ $p = fp8 ] && a=("${m8[@]}")
    CONVEYOR_COLD_GEMM_TUNE=$c timeout 60 build/conveyor bench latency "${a[@]}" --input-len 16 --output-len 4 \
      --batch-size 1 --num-iters-warmup 0 --num-iters 1 --set logging.level=debug > $r/choices_${p}_cold$c.txt 2>&1
    save "choices $p cold=$c rc=$? $(grep -E '^m=1 ' $r/choices_${p}_cold$c.txt | cut -c1-90 | tr '\n' ';' | cut -c1-600)"
  done
done
latency_ab bf16 CONVEYOR_COLD_GEMM_TUNE 1 0 1 0 -- "${mb[@]}"
latency_ab fp8 CONVEYOR_COLD_GEMM_TUNE 1 0 1 -- "${m8[@]}"
