#!/usr/bin/env bash
# Round 15's third call (H100 or H200; carry .gpu-deps; ~260 s): the decode shapes' GEMM races timed with the L2
# flushed before each run (launch_timer.h, ColdL2: CONVEYOR_COLD_GEMM_TUNE=1) against the warm races: the tests of
# the runner and of a decode step's allocations with it on; the bf16 GEMM choices each way (logging.level=debug, a
# short run); batch 1 bf16 128/128 cold, warm, cold.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
tests=(kernels_gemm_gpu_test stages_cuda_step_alloc_gpu_test stages_cuda_golden_gpu_test)
call_begin r15d conveyor "${tests[@]}" || exit 1
CONVEYOR_COLD_GEMM_TUNE=1 run_tests "${tests[@]}"
mb=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
for c in 1 0; do
  CONVEYOR_COLD_GEMM_TUNE=$c timeout 60 build/conveyor bench latency "${mb[@]}" --input-len 16 --output-len 4 \
    --batch-size 1 --num-iters-warmup 0 --num-iters 1 --set logging.level=debug > $r/choices_bf16_cold$c.txt 2>&1
  save "choices cold=$c rc=$? $(grep -E '^m=1 ' $r/choices_bf16_cold$c.txt | cut -c1-90 | tr '\n' ';' | cut -c1-500)"
done
latency_ab bf16 CONVEYOR_COLD_GEMM_TUNE 1 0 1 -- "${mb[@]}"
