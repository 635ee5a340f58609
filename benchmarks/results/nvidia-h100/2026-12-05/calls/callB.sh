#!/usr/bin/env bash
# Round 3, device call B (carry .smolB; call A left the build and /tmp/smolA): the second GGUF piece, then
# the 1-GPU suite's runs with the start-up GEMM warm-up on (the default): batch 64 512/256, the same with
# runtime.gemm_warmup=false, batch 1 128/128 bf16, batch 1 FP8 weights with the FP8 gemv auto and off, and
# the batch-256 decode step's timeline (1024 in / 128 out), 1,000 prompts 1024/1024 while time lasts; each beside its `plan --compare` prediction from call A's doctor.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
cp .smolB/p /tmp/smolB
r=/tmp/b; mkdir -p $r
save() { tar czf "$OUT/b.tgz" -C /tmp b; echo "[$(el)] $*"; }
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
plan() {  # <name> <batch or 0> <in> <out>
  local b=(); [ "$2" != 0 ] && b=(--batch "$2")
  build/conveyor plan --compare --gpus 1 --set model.config=configs/models/llama-3-8b.yaml "${b[@]}" --input-len $3 \
    --output-len $4 --doctor-json /tmp/a/doctor.json --output-json $r/$1.predicted.json > $r/$1.predicted.txt 2>&1
}
plan batch64 64 512 256; plan latency_b1 1 128 128; plan throughput 0 1024 1024; save plans
timeout 120 build/conveyor bench throughput "${m[@]}" --input-len 512 --output-len 256 --num-prompts 64 --max-num-seqs 64 \
  --output-json $r/b64.json > $r/b64.txt 2>&1
save "b64 warm-up on rc=$? $(grep -iE 'Throughput' $r/b64.txt | head -1)"; grep -iE "GEMM warm-up|KV holds|GiB" $r/b64.txt | head -12
timeout 100 build/conveyor bench throughput "${m[@]}" --input-len 512 --output-len 256 --num-prompts 64 --max-num-seqs 64 \
  --set runtime.gemm_warmup=false --output-json $r/b64_nowarm.json > $r/b64_nowarm.txt 2>&1
save "b64 warm-up off rc=$? $(grep -iE 'Throughput' $r/b64_nowarm.txt | head -1)"
timeout 100 build/conveyor bench latency "${m[@]}" --input-len 128 --output-len 128 --batch-size 1 --num-iters-warmup 3 \
  --num-iters 10 --output-json $r/b1.json > $r/b1.txt 2>&1
save "b1 rc=$? $(grep -iE 'tok/s|Avg latency' $r/b1.txt | head -2 | tr '\n' ' ')"
for g in auto off; do
  timeout 100 build/conveyor bench latency "${m[@]}" --input-len 128 --output-len 128 --batch-size 1 --num-iters-warmup 3 \
    --num-iters 10 --quantization fp8 --set runtime.fp8_gemv=$g --output-json $r/b1_fp8_gemv_$g.json > $r/b1_fp8_gemv_$g.txt 2>&1
  save "b1 fp8 gemv=$g rc=$? $(grep -iE 'tok/s|Avg latency' $r/b1_fp8_gemv_$g.txt | head -2 | tr '\n' ' ')"
done
timeout 120 build/conveyor bench latency "${m[@]}" --input-len 1024 --output-len 128 --batch-size 256 --num-iters-warmup 1 \
  --num-iters 1 --step-timeline $r/steps_b256.json --output-json $r/b256_latency.json > $r/b256_latency.txt 2>&1
save "b256 step timeline rc=$?"; grep -A16 -i "step timeline" $r/b256_latency.txt | head -20; gzip -f $r/steps_b256.json
[ "$(left)" -gt 100 ] && timeout $(($(left) - 8)) build/conveyor bench throughput "${m[@]}" --input-len 1024 --output-len 1024 \
  --num-prompts 1000 --output-json $r/t1000.json > $r/t1000.txt 2>&1
save "1000 prompts rc=$? $(grep -iE 'batch from memory|Throughput|TTFT' $r/t1000.txt | tr '\n' ' ')"
