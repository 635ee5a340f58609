#!/usr/bin/env bash
# Round 15's call for an H200 (needs_h200; carry .gpu-deps; ~570 s): what round 13's call_r13a.sh left for an H200
# without its H100 half (round 13 ran the wide-row A/B and the GPU tests on an H100). attention_bench's ws kernel
# (issue 16), batch 1 bf16 with PDL on and off (issue 16 asks >= 229), batch 1 FP8 (issue 15 asks >= 426), then
# the FP8 1,000 prompts at 512 sequences and at the auto batch (the simulator, round 12: 13,949 at auto).
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
call_begin r15a conveyor attention_bench || exit 1
timeout 100 build/benchmarks/attention_bench --json $r/attention.json > $r/attention.txt 2>&1
save "attention_bench rc=$? $(grep -iE 'prefill' $r/attention.txt | head -6 | tr '\n' ' ' | cut -c1-400)"
mb=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
latency_ab bf16 CONVEYOR_PDL 1 0 -- "${mb[@]}"
m=("${mb[@]}" --quantization fp8 --kv-cache-dtype fp8)
latency_ab fp8 CONVEYOR_PDL 1 -- "${m[@]}"
throughput_seqs fp8 512 auto -- "${m[@]}"
