#!/usr/bin/env bash
# Round 5, device call A (carry .gpu-deps .smolA; a fresh machine): build; the restructured prefill attention
# kernel (128 rows per CTA over 8 warps, double-buffered K/V tiles, block-table entries read a tile ahead,
# heads fastest and last rows first in the grid, unmasked whole tiles): its tests against the CPU twin, then
# attention_bench bf16 and FP8 KV; if a test fails, the round-4 kernel (attention_prefill_before.cu) is
# built back in so that later calls run a correct one. Then doctor and the plans from it.
# $OUT/a.tgz is rewritten after every step, so a call cut short still returns what it did.
set -uo pipefail
here=benchmarks/results/nvidia-h200/next/calls
source benchmarks/results/nvidia-h200/final/env.sh
r=/tmp/a; mkdir -p $r
save() { tar czf "$OUT/a.tgz" -C /tmp a; echo "[$(el)] $*"; }
cp .smolA/p /tmp/smolA
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $r/gpu.txt
(cmake -S . -B build -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 -DCONVEYOR_WERROR=OFF && ninja -C build -j16) > $r/build.log 2>&1 ||
  { grep -B2 -A10 -m5 "error" $r/build.log; save "build FAILED"; exit 1; }
save build
for t in kernels_attention_gpu_test kernels_attention_fp8_gpu_test; do
  CONVEYOR_REQUIRE_GPU=1 timeout 100 ctest --test-dir build -R "^$t\$" --output-on-failure --timeout 90 > $r/ctest_$t.log 2>&1
  save "$t rc=$? $(grep -E 'Test +#' $r/ctest_$t.log)"
  grep -E "FAILED|Failure|Expected|Which is|max_abs|mismatch" $r/ctest_$t.log | head -12
done
timeout 100 build/benchmarks/attention_bench --json $r/attention.json > $r/attention.txt 2>&1
save "attention_bench rc=$?"; grep -i prefill $r/attention.txt | cut -c1-220
timeout 80 build/benchmarks/attention_bench --kv-cache-dtype fp8 --json $r/attention_fp8.json > $r/attention_fp8.txt 2>&1
save "attention_bench fp8 rc=$?"; grep -i prefill $r/attention_fp8.txt | cut -c1-220
if [ "$(grep -l '100% tests passed' $r/ctest_kernels_attention_gpu_test.log $r/ctest_kernels_attention_fp8_gpu_test.log | wc -l)" != 2 ]; then
  cp $here/attention_prefill_before.cu kernels/cuda/attention_prefill.cu
  ninja -C build -j16 > $r/build_fallback.log 2>&1; touch $r/FALLBACK_KERNEL
  for t in kernels_attention_gpu_test kernels_attention_fp8_gpu_test; do
    CONVEYOR_REQUIRE_GPU=1 timeout 100 ctest --test-dir build -R "^$t\$" --output-on-failure --timeout 90 > $r/fallback_$t.log 2>&1
    save "fallback $t rc=$?"
  done
fi
timeout 90 build/conveyor doctor --output-json $r/doctor.json > $r/doctor.log 2>&1
save "doctor rc=$?"; grep -iE "prefill|attention" $r/doctor.log | head -6
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
plan() {  # <name> <batch or 0> <in> <out>
  local b=(); [ "$2" != 0 ] && b=(--batch "$2")
  build/conveyor plan --compare --gpus 1 --set model.config=configs/models/llama-3-8b.yaml "${b[@]}" --input-len $3 \
    --output-len $4 --doctor-json $r/doctor.json --output-json $r/$1.predicted.json > $r/$1.predicted.txt 2>&1
}
plan batch64 64 512 256; plan latency_b1 1 128 128; plan throughput 0 1024 1024; save plans
