#!/usr/bin/env bash
# Issue 15 on one H200: the FP8 GPU tests, then the Llama-3-8B shape (dummy weights) in bf16 and with
# FP8 weights (--quantization fp8) side by side: batch 1 128/128 (bench latency) and NUM_PROMPTS
# prompts 1024/1024 (bench throughput), as benchmarks/suite_h200.sh runs them. JSON and logs go to
# $OUT (default: this folder). The FP8 KV cache is not implemented yet, so KV stays bf16 in every run.
# Usage (from anywhere, after a CUDA build in build/): benchmarks/results/nvidia-h200/issue15/run.sh
# Env: CONVEYOR (default build/conveyor), BUILD (default build), NUM_PROMPTS (default 1000; the whole
# script is sized to finish in < 8 minutes with it), STEPS (default "tests latency throughput").
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../../.."
bin=${CONVEYOR:-build/conveyor}
build=${BUILD:-build}
out=${OUT:-$here}
prompts=${NUM_PROMPTS:-1000}
mkdir -p "$out"
model=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
declare -A quant=([bf16]="" [fp8]="--quantization fp8")
status=0

for step in ${STEPS:-tests latency throughput}; do
  echo "=== $step"
  case $step in
    tests)  # every FP8 kernel against its CPU twin, and the tiny FP8 checkpoints through the CUDA stage
      CONVEYOR_REQUIRE_GPU=1 ctest --test-dir "$build" -L gpu -R fp8 --output-on-failure 2>&1 |
        tee "$out/gpu_tests.log" || status=1 ;;
    latency)  # batch 1, 128 in / 128 out: the weight-bandwidth roofline
      for v in bf16 fp8; do
        # shellcheck disable=SC2086
        timeout 150 "$bin" bench latency "${model[@]}" ${quant[$v]} --input-len 128 --output-len 128 --batch-size 1 \
          --num-iters-warmup 2 --num-iters 5 --output-json "$out/latency_b1.$v.json" 2>&1 |
          tee "$out/latency_b1.$v.log" || status=1
      done ;;
    throughput)  # NUM_PROMPTS prompts, 1024 in / 1024 out (the TensorRT-LLM anchor's 1000/1000 workload)
      for v in bf16 fp8; do
        # shellcheck disable=SC2086
        timeout 200 "$bin" bench throughput "${model[@]}" ${quant[$v]} --input-len 1024 --output-len 1024 \
          --num-prompts "$prompts" --output-json "$out/throughput.$v.json" 2>&1 | tee "$out/throughput.$v.log" || status=1
      done ;;
    *) echo "unknown step '$step' (tests latency throughput)"; exit 2 ;;
  esac
done
exit $status
