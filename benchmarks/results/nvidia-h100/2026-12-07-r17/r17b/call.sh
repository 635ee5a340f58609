#!/usr/bin/env bash
# Round 17's first call (any GPU; carry .gpu-deps; ~550 s, BUDGET_S=560). (1) The Fp8Half gemv (x made f16 once
# per block; sm_90 emulates the e4m3 mma.sync by converting both operands on every use) and the read flush, never
# GPU-run: their tests. (2) Batch 1 FP8 with runtime.fp8_gemv=auto, the new kernel against the old
# (CONVEYOR_FP8_GEMV_HALF 1 / 0 / 1), and with the gemv off; the races' choices. (3) The cold bf16 races with the
# read flush: choices and batch 1 bf16 cold / warm / cold. (4) attention_bench. (5) The FP8 1,000 prompts (auto).
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
tests=(kernels_fp8_gpu_test stages_cuda_fp8_gpu_test kernels_elementwise_gpu_test)
call_begin r17b conveyor attention_bench "${tests[@]}" kernels_gemm_gpu_test || exit 1
run_tests "${tests[@]}"
CONVEYOR_COLD_GEMM_TUNE=1 run_tests kernels_gemm_gpu_test
mb=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
m=("${mb[@]}" --quantization fp8 --kv-cache-dtype fp8)
choices() {  # TAG VAR VALUE ARGS...: the m = 1 choices of one short debug run
  local tag=$1 var=$2 val=$3; shift 3
  env "$var=$val" timeout 60 build/conveyor bench latency "$@" --input-len 16 --output-len 4 --batch-size 1 \
    --num-iters-warmup 0 --num-iters 1 --set logging.level=debug > $r/choices_$tag.txt 2>&1
  save "choices $tag rc=$? $(grep -E '^m=1 ' $r/choices_$tag.txt | cut -c1-90 | tr '\n' ';' | cut -c1-600)"
}
choices fp8_half1 CONVEYOR_FP8_GEMV_HALF 1 "${m[@]}" --set runtime.fp8_gemv=auto
choices fp8_half0 CONVEYOR_FP8_GEMV_HALF 0 "${m[@]}" --set runtime.fp8_gemv=auto
latency_ab fp8auto CONVEYOR_FP8_GEMV_HALF 1 0 1 -- "${m[@]}" --set runtime.fp8_gemv=auto
latency_ab fp8off CONVEYOR_FP8_GEMV_HALF 1 -- "${m[@]}"
choices bf16_cold1 CONVEYOR_COLD_GEMM_TUNE 1 "${mb[@]}"
choices bf16_cold0 CONVEYOR_COLD_GEMM_TUNE 0 "${mb[@]}"
latency_ab bf16 CONVEYOR_COLD_GEMM_TUNE 1 0 1 -- "${mb[@]}"
timeout 100 build/benchmarks/attention_bench --json $r/attention.json > $r/attention.txt 2>&1
save "attention_bench rc=$? $(grep -E '"prefill_(4096|8192|16384)"' $r/attention.txt | tr '\n' ' ' | cut -c1-500)"
throughput_seqs fp8 auto -- "${m[@]}"
