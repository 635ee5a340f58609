#!/usr/bin/env bash
# The next call (any GPU for (1)-(2); an H200 for the issue figures; carry .gpu-deps; ~520 s, BUDGET_S=560).
# (0) The e4m3 conversions of e4m3.cuh (the gemv, FP8 decode attention; never GPU-run): the FP8 kernel and stage tests.
# (1) The Fp8Half gemv's preload (its first weights loaded before the block makes x; never GPU-run): the kernel test,
# the m = 1 choices with it on and off, batch 1 FP8 under runtime.fp8_gemv=auto with CONVEYOR_FP8_GEMV_PRELOAD
# 1 / 0 / 1 and with the gemv off. (2) attention_bench with the FP8 KV cache (its decode rows: what the FP8 1,000
# prompts spend most of their time in). (3) attention_bench bf16 (issue 16: >= 350 TFLOP/s at 8k on an H200) and
# batch 1 bf16 (>= 229). (4) The FP8 1,000 prompts at the auto batch and at 512 (issue 15: >= 18,000).
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
tests=(kernels_fp8_gpu_test kernels_attention_fp8_gpu_test stages_cuda_fp8_gpu_test)
call_begin r18 conveyor attention_bench "${tests[@]}" || exit 1
run_tests "${tests[@]}"
mb=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
m=("${mb[@]}" --quantization fp8 --kv-cache-dtype fp8)
for p in 1 0; do
  CONVEYOR_FP8_GEMV_PRELOAD=$p timeout 60 build/conveyor bench latency "${m[@]}" --set runtime.fp8_gemv=auto \
    --input-len 16 --output-len 4 --batch-size 1 --num-iters-warmup 0 --num-iters 1 --set logging.level=debug \
    > $r/choices_preload$p.txt 2>&1
  save "choices preload=$p rc=$? $(grep -E '^m=1 ' $r/choices_preload$p.txt | cut -c1-90 | tr '\n' ';' | cut -c1-600)"
done
latency_ab fp8auto CONVEYOR_FP8_GEMV_PRELOAD 1 0 1 -- "${m[@]}" --set runtime.fp8_gemv=auto
latency_ab fp8off CONVEYOR_FP8_GEMV_PRELOAD 1 -- "${m[@]}"
timeout 100 build/benchmarks/attention_bench --kv-cache-dtype fp8 --json $r/attention_fp8.json \
  > $r/attention_fp8.txt 2>&1
save "attention_bench fp8 rc=$? $(grep -oE '"name": "decode_b(64|256)[^"]*".*"GB/s": [0-9.]+' $r/attention_fp8.txt |
  sed 's/"shape".*"GB/GB/' | tr '\n' ' ')"
timeout 100 build/benchmarks/attention_bench --json $r/attention.json > $r/attention.txt 2>&1
save "attention_bench rc=$? $(grep -oE '"name": "prefill_(4096|8192|16384)".*"TFLOP/s": [0-9.]+' $r/attention.txt |
  sed 's/"shape".*"TFLOP/TFLOP/' | tr '\n' ' ')"
latency_ab bf16 CONVEYOR_PDL 1 -- "${mb[@]}"
throughput_seqs fp8 auto 512 -- "${m[@]}"
