#!/usr/bin/env bash
# Round 23's second call (any GPU; carry .gpu-deps; ~450 s; right after call_r23.sh on the warm machine).
# (1) Batch 256 bf16 (bf16 KV: the CUDA-core decode kernel, issue 16's 1,000 prompts) 128 in / 512 out,
# CONVEYOR_DECODE_HEADS_FIRST 0 / 1 / 0 / 1. (2) The FP8 1,000 prompts with --step-timeline, split by kind of step
# (benchmarks/timeline_split.py: decode steps by batch, mixed steps by tokens, device forward / sampling / idle).
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
call_begin r23b conveyor || exit 1
bf16=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
b256_ab bf16hf CONVEYOR_DECODE_HEADS_FIRST 0 1 0 1 -- "${bf16[@]}"
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16 --quantization fp8
  --kv-cache-dtype fp8)
throughput_seqs fp8_timeline auto -- "${m[@]}" --step-timeline $r/steps_fp8.json
python3 benchmarks/timeline_split.py $r/steps_fp8.json --json $r/timeline_split_fp8.json > $r/timeline_split_fp8.txt 2>&1
head -20 $r/timeline_split_fp8.txt
gzip -f $r/steps_fp8.json 2>/dev/null
save "timeline split"
