#!/usr/bin/env bash
# Round 5, device call B (carry .smolB; call A left the build, /tmp/a and /tmp/smolA): the second GGUF piece
# (call C reassembles the model), then batch 64 512/256 and batch 1 128/128 with the GEMM warm-up and the new
# prefill kernel.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
cp .smolB/p /tmp/smolB
r=/tmp/b; mkdir -p $r
save() { tar czf "$OUT/b.tgz" -C /tmp b; echo "[$(el)] $*"; }
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
timeout 120 build/conveyor bench throughput "${m[@]}" --input-len 512 --output-len 256 --num-prompts 64 --max-num-seqs 64 \
  --output-json $r/batch64.conveyor.json > $r/b64.txt 2>&1
save "b64 rc=$? $(grep -iE 'Throughput' $r/b64.txt | head -1)"
timeout 100 build/conveyor bench latency "${m[@]}" --input-len 128 --output-len 128 --batch-size 1 --num-iters-warmup 3 \
  --num-iters 10 --output-json $r/latency_b1.conveyor.json > $r/b1.txt 2>&1
save "b1 rc=$? $(grep -iE 'tok/s|Avg latency' $r/b1.txt | head -2 | tr '\n' ' ')"
