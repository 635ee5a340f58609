#!/usr/bin/env bash
# Round 5, device call D (no carry; after calls A, B and C on the same machine): batch 1 128/128; the HF peers in this same
# round (static cache, batch 64 512/256 and batch 1 128/128: issue 16's "2.5x HF static"); FP8 batch 1 with
# logging.level=debug (each GEMM shape's gemv/cuBLASLt choice); then the 1,000 prompts 1024/1024 while time
# lasts.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
r=/tmp/d; mkdir -p $r
save() { tar czf "$OUT/d.tgz" -C /tmp d; echo "[$(el)] $*"; }
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
timeout 100 build/conveyor bench latency "${m[@]}" --input-len 128 --output-len 128 --batch-size 1 --num-iters-warmup 3 \
  --num-iters 10 --output-json $r/latency_b1.conveyor.json > $r/b1.txt 2>&1
save "b1 rc=$? $(grep -iE 'tok/s|Avg latency' $r/b1.txt | head -2 | tr '\n' ' ')"
for w in "batch64 64 512 256" "latency_b1 1 128 128"; do
  set -- $w
  timeout 150 python3 benchmarks/peers/hf_generate.py --config configs/models/llama-3-8b.yaml --device cuda --dtype bfloat16 \
    --batch $2 --input-len $3 --output-len $4 --cache static --iters 1 --output-json $r/$1.hf_static.json > $r/$1.hf_static.txt 2>&1
  save "HF static $1 rc=$? $(python3 -c "import json;print(round(json.load(open('$r/$1.hf_static.json'))['output_tokens_per_second'],1))" 2>/dev/null)"
done
timeout 100 build/conveyor bench latency "${m[@]}" --input-len 128 --output-len 128 --batch-size 1 --num-iters-warmup 3 \
  --num-iters 10 --quantization fp8 --set runtime.fp8_gemv=auto --set logging.level=debug \
  --output-json $r/b1_fp8_auto.json > $r/b1_fp8_auto.txt 2>&1
save "b1 fp8 gemv=auto rc=$? $(grep -iE 'tok/s|Avg latency' $r/b1_fp8_auto.txt | head -2 | tr '\n' ' ')"
grep -iE -A12 "GEMM choices" $r/b1_fp8_auto.txt | head -14
[ "$(left)" -gt 150 ] && timeout $(($(left) - 8)) build/conveyor bench throughput "${m[@]}" --input-len 1024 --output-len 1024 \
  --num-prompts 1000 --output-json $r/throughput.conveyor.json > $r/t1000.txt 2>&1
save "1000 prompts rc=$? $(grep -iE 'batch from memory|Throughput|TTFT' $r/t1000.txt | tr '\n' ' ')"
