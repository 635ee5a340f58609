#!/usr/bin/env bash
# Round 10's H200 call (needs_h200: a 70B model with FP8 weights and KV does not fit 78 GiB; carry .gpu-deps;
# ~520 s): issue 15's 70B item. Build conveyor; doctor on this H200 (its first FP8 linear and tensor-core FP8
# decode lines); the simulator's predictions for the 70B and 8B FP8 1,000 prompts from it; then the 70B
# 1,000 prompts 1024/1024 (FP8 weights + FP8 KV, dummy weights made in FP8 directly) with the start-up memory
# table (issue 15 item 6: >= 150 sequences of 2,048 tokens). call_r10b.sh follows on the warm machine.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
call_begin r10c conveyor || exit 1
timeout 150 build/conveyor doctor --output-json $r/doctor.json > $r/doctor.log 2>&1
save "doctor rc=$? $(grep -E 'FP8 linear|decode attention|prefill' $r/doctor.log | tr -s ' ' | tr '\n' ' ' | cut -c1-600)"
save "plan fp8 8b 1000: $(plan_here fp8 fp8 prompts=1000,input=1024,output=1024)"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && echo h200 || echo h100)
build/conveyor plan --cluster $r/cluster_fp8.yaml --set model.config=configs/models/llama-3-70b.yaml \
  --workload prompts=1000,input=1024,output=1024 --output-json $r/plan_70b_fp8.json > $r/plan_70b_fp8.txt 2>&1
save "plan fp8 70b 1000 ($gpu): $(sed -n 6p $r/plan_70b_fp8.txt | tr -s ' ')"
m70=(--load-format dummy --set model.config=configs/models/llama-3-70b.yaml --dtype bfloat16 --quantization fp8
  --kv-cache-dtype fp8)
timeout $(($(left) - 12)) build/conveyor bench throughput "${m70[@]}" --input-len 1024 --output-len 1024 \
  --num-prompts 1000 --output-json $r/throughput.70b.fp8.json > $r/t1000_70b_fp8.txt 2>&1
save "70b 1000 prompts fp8 rc=$? $(grep -iE 'Throughput|TTFT|batch from memory' $r/t1000_70b_fp8.txt | tr '\n' ' ' | cut -c1-500)"
grep -A4 "GPU memory per rank" $r/t1000_70b_fp8.txt | head -6
