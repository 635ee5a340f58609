#!/usr/bin/env bash
# Ran in round 22 (../../nvidia-h100/2026-12-07-r22); the switches it times have since been made the rule or removed.
# Round 22's second call (any GPU; carry .gpu-deps; ~520 s; right after call_r22.sh on the warm machine, whose
# build it reuses). (0) On an H200 only: issue 15's 1,000 prompts FP8 (1000 in / 1000 out) under the defaults.
# (1) ncu over one batch-256 FP8 decode step (round 19's step, 1024 in) under the defaults: the small kernels
# against round 19's. (2) CONVEYOR_FP8_GEMM_TUNE 0 / 1 / 0 / 1 on batch 256 FP8 128 in / 512 out. (3) Batch 1
# bf16 with the fused gemv (CONVEYOR_FUSED_GEMV, pipelined since round 21), 0 / 1 / 0 / 1.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
call_begin r22b conveyor || exit 1
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16 --quantization fp8
  --kv-cache-dtype fp8)
grep -q H200 "$r/gpu.txt" && throughput_seqs fp8 auto -- "${m[@]}"
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
[ "$(left)" -gt 120 ] && timeout 110 $ncu --profile-from-start off --clock-control none --cache-control none \
  --metrics gpu__time_duration.sum --csv --log-file $r/ncu_b256.csv build/conveyor bench latency "${m[@]}" \
  --input-len 1024 --output-len 48 --batch-size 256 --num-iters 1 --num-iters-warmup 0 \
  --set runtime.profile_step=40 > $r/ncu_b256.txt 2>&1
python3 benchmarks/ncu_breakdown.py $r/ncu_b256.csv --json $r/ncu_b256.json > $r/breakdown_b256.txt 2>&1
gzip -f $r/ncu_b256.csv
save "ncu b256: $(head -24 $r/breakdown_b256.txt | tr -s ' ' | tr '\n' ' ' | cut -c1-1500)"
for i in 1 2 3 4; do
  v=$((1 - i % 2))
  [ "$(left)" -lt 60 ] && { save "no time left for b256 tune $i"; continue; }
  CONVEYOR_FP8_GEMM_TUNE=$v timeout 100 build/conveyor bench latency "${m[@]}" --input-len 128 --output-len 512 \
    --batch-size 256 --num-iters-warmup 1 --num-iters 3 --output-json "$r/latency_b256.tune.$i.json" \
    > "$r/b256.tune.$i.txt" 2>&1
  save "b256 fp8 CONVEYOR_FP8_GEMM_TUNE=$v rc=$? $(grep -iE 'Avg latency' "$r/b256.tune.$i.txt")"
done
bf16=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
latency_ab fused_bf16 CONVEYOR_FUSED_GEMV 0 1 0 1 -- "${bf16[@]}"
