#!/usr/bin/env bash
# Round 17's second call (an H200 for the issue figures, any GPU for the rest; carry .gpu-deps; ~540 s,
# BUDGET_S=560). runtime.fp8_gemv is auto by default now. (1) stages_cuda_fp8_gpu_test (its new case: every decode
# linear through the gemv, then through cuBLASLt). (2) attention_bench (issue 16: >= 350 TFLOP/s at 8k on an H200).
# (3) Batch 1 bf16 (issue 16: >= 229). (4) Batch 1 FP8 with the gemv auto / off / auto (issue 15: >= 426).
# (5) The FP8 1,000 prompts at the auto batch (issue 15: >= 18,000).
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
call_begin r17c conveyor attention_bench stages_cuda_fp8_gpu_test || exit 1
run_tests stages_cuda_fp8_gpu_test
grep -E "tokens equal" $r/stages_cuda_fp8_gpu_test.log | tr '\n' ';' | cut -c1-900; echo
timeout 100 build/benchmarks/attention_bench --json $r/attention.json > $r/attention.txt 2>&1
save "attention_bench rc=$? $(grep -oE '"name": "prefill_(4096|8192|16384)".*"TFLOP/s": [0-9.]+' $r/attention.txt |
  sed 's/"shape".*"TFLOP/TFLOP/' | tr '\n' ' ')"
mb=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
m=("${mb[@]}" --quantization fp8 --kv-cache-dtype fp8)
latency_ab bf16 CONVEYOR_PDL 1 -- "${mb[@]}"
for g in auto off auto; do latency_ab fp8_$g CONVEYOR_PDL 1 -- "${m[@]}" --set runtime.fp8_gemv=$g; done
throughput_seqs fp8 auto -- "${m[@]}"
