#!/usr/bin/env bash
# Round 5, device call B (carry .smolB; call A left the build, /tmp/a and /tmp/smolA): the second GGUF piece
# (call C reassembles the model), then batch 64 512/256 with the GEMM warm-up and the new prefill kernel (batch 1
# moved to call D: device time was short).
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
cp .smolB/p /tmp/smolB
r=/tmp/b; mkdir -p $r
save() { tar czf "$OUT/b.tgz" -C /tmp b; echo "[$(el)] $*"; }
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
timeout 120 build/conveyor bench throughput "${m[@]}" --input-len 512 --output-len 256 --num-prompts 64 --max-num-seqs 64 \
  --output-json $r/batch64.conveyor.json > $r/b64.txt 2>&1
save "b64 rc=$? $(grep -iE 'Throughput' $r/b64.txt | head -1)"
