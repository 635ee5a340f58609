#!/usr/bin/env bash
# The next call for an H200 (needs_h200; carry .gpu-deps; ~450 s, BUDGET_S=540): what issues 15 and 16 ask of one
# H200 that round 16 could only run on an H100. attention_bench (issue 16: >= 350 TFLOP/s causal at 8k; the H100
# read 408.7), batch 1 bf16 with PDL on, off, on (issue 16 asks >= 229; 216.9 in round 10 with PDL off), batch 1
# FP8 (issue 15 asks >= 426), then the FP8 1,000 prompts at the auto batch and at 512 (issue 15 asks >= 18,000).
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
call_begin r17 conveyor attention_bench || exit 1
timeout 100 build/benchmarks/attention_bench --json $r/attention.json > $r/attention.txt 2>&1
save "attention_bench rc=$? $(grep -E '"prefill_(4096|8192|16384)"' $r/attention.txt | tr '\n' ' ' | cut -c1-500)"
mb=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
latency_ab bf16 CONVEYOR_PDL 1 0 1 -- "${mb[@]}"
m=("${mb[@]}" --quantization fp8 --kv-cache-dtype fp8)
latency_ab fp8 CONVEYOR_PDL 1 -- "${m[@]}"
throughput_seqs fp8 auto 512 -- "${m[@]}"
