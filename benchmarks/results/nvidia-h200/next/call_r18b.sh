#!/usr/bin/env bash
# Round 18's second call (any GPU; carry .gpu-deps; ~200 s): where batch 1 FP8 and the FP8 1,000 prompts' decode
# steps spend their time with the Fp8Half gemv (ncu, kernels alone): one batch-1 FP8 step under
# runtime.fp8_gemv=auto and one with cuBLASLt (off), one batch-256 FP8 decode step at 1,024 positions.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
call_begin r18b conveyor || exit 1
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16 --quantization fp8
  --kv-cache-dtype fp8)
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
step() {  # step TAG ARGS...: ncu over step 40, its breakdown in $r/breakdown_TAG.txt
  local tag=$1; shift
  [ "$(left)" -lt 60 ] && { save "no time left for $tag"; return; }
  timeout $(($(left) - 10)) $ncu --profile-from-start off --clock-control none --cache-control none \
    --metrics gpu__time_duration.sum --csv --log-file $r/ncu_$tag.csv build/conveyor bench latency "${m[@]}" "$@" \
    --num-iters 1 --num-iters-warmup 0 --set runtime.profile_step=40 > $r/ncu_$tag.txt 2>&1
  python3 benchmarks/ncu_breakdown.py $r/ncu_$tag.csv --json $r/ncu_$tag.json > $r/breakdown_$tag.txt 2>&1
  gzip -f $r/ncu_$tag.csv
  save "ncu $tag: $(head -12 $r/breakdown_$tag.txt | tr -s ' ' | tr '\n' ' ' | cut -c1-600)"
}
step b1_auto --input-len 128 --output-len 64 --batch-size 1 --set runtime.fp8_gemv=auto
step b1_off --input-len 128 --output-len 64 --batch-size 1
step b256 --input-len 1024 --output-len 48 --batch-size 256
