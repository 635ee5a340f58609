#!/usr/bin/env bash
# Round 5, device call A (carry .gpu-deps .smolA; a fresh machine): build; two restructured prefill attention
# kernels, each through its tests against the CPU twin (bf16/f16 and FP8 KV) and attention_bench (bf16):
#   v8  (the tree's kernels/cuda/attention_prefill.cu): 128 rows per CTA over 8 warps of 16 rows, Q in registers;
#   w32 (attention_prefill_w32.cu here): 128 rows per CTA over 4 warps of 32 rows (each K/V fragment feeds two
#        mma), Q in shared memory;
# both with double-buffered K/V tiles, block-table entries read a tile ahead, heads fastest and last rows first.
# The faster one of those that pass stays built for calls B-D (neither passing: the round-4 kernel,
# attention_prefill_before.cu); $r/CHOSEN names it. Then doctor and the plans from it.
# The two kernel files sat in this folder (then benchmarks/results/nvidia-h200/next/calls/) for the call and are
# not kept here: w32 won and is kernels/cuda/attention_prefill.cu from the commit after the round; v8 is
# `git show ea8ac19:kernels/cuda/attention_prefill.cu`, "before" `git show 72db7b6:kernels/cuda/attention_prefill.cu`.
# $OUT/a.tgz is rewritten after every step, so a call cut short still returns what it did.
set -uo pipefail
here=benchmarks/results/nvidia-h200/next/calls  # where the calls were at the time
source benchmarks/results/nvidia-h200/final/env.sh
r=/tmp/a; mkdir -p $r
save() { tar czf "$OUT/a.tgz" -C /tmp a; echo "[$(el)] $*"; }
cp .smolA/p /tmp/smolA
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $r/gpu.txt
(cmake -S . -B build -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 -DCONVEYOR_WERROR=OFF && ninja -C build -j16) > $r/build.log 2>&1 ||
  { grep -B2 -A10 -m5 "error" $r/build.log; save "build FAILED"; exit 1; }
save build
k=kernels/cuda/attention_prefill.cu
cp $k /tmp/v8.cu
tflops() { python3 -c "import json,sys; print(next(x['TFLOP/s'] for x in json.load(open(sys.argv[1])) if x['name']=='prefill_8192'))" "$1" 2>/dev/null || echo 0; }
try() {  # <tag>: the built kernel's tests and benchmarks; prints PASS or FAIL
  local tag=$1 t
  for t in kernels_attention_gpu_test kernels_attention_fp8_gpu_test; do
    CONVEYOR_REQUIRE_GPU=1 timeout 100 ctest --test-dir build -R "^$t\$" --output-on-failure --timeout 90 > $r/${tag}_ctest_$t.log 2>&1
    save "$tag $t rc=$? $(grep -E 'Test +#' $r/${tag}_ctest_$t.log)" >&2
    grep -E "FAILED|Failure|Expected|Which is|max_abs|mismatch" $r/${tag}_ctest_$t.log | head -8 >&2
  done
  timeout 100 build/benchmarks/attention_bench --json $r/${tag}_attention.json > $r/${tag}_attention.txt 2>&1
  save "$tag attention_bench rc=$?" >&2; grep -i prefill $r/${tag}_attention.txt | cut -c1-200 >&2
  [ "$(grep -l '100% tests passed' $r/${tag}_ctest_*.log | wc -l)" = 2 ] && echo PASS || echo FAIL
}
rebuild() { cp "$1" $k && ninja -C build -j16 > $r/build_$2.log 2>&1; save "rebuilt with $2 rc=$?"; }
v8=$(try v8); v8_t=$(tflops $r/v8_attention.json)
rebuild $here/attention_prefill_w32.cu w32
w32=$(try w32); w32_t=$(tflops $r/w32_attention.json)
echo "v8 $v8 $v8_t TFLOP/s at 8k; w32 $w32 $w32_t TFLOP/s at 8k" | tee $r/variants.txt
if [ "$w32" = PASS ] && { [ "$v8" != PASS ] || python3 -c "import sys; sys.exit(0 if $w32_t > $v8_t else 1)"; }; then
  echo w32 > $r/CHOSEN
elif [ "$v8" = PASS ]; then
  echo v8 > $r/CHOSEN; rebuild /tmp/v8.cu v8
else
  echo before > $r/CHOSEN; rebuild $here/attention_prefill_before.cu before; try before > /dev/null
fi
save "chosen: $(cat $r/CHOSEN)"
timeout 90 build/conveyor doctor --output-json $r/doctor.json > $r/doctor.log 2>&1
save "doctor rc=$?"; grep -iE "prefill|attention" $r/doctor.log | head -6
plan() {  # <name> <batch or 0> <in> <out>
  local b=(); [ "$2" != 0 ] && b=(--batch "$2")
  build/conveyor plan --compare --gpus 1 --set model.config=configs/models/llama-3-8b.yaml "${b[@]}" --input-len $3 \
    --output-len $4 --doctor-json $r/doctor.json --output-json $r/$1.predicted.json > $r/$1.predicted.txt 2>&1
}
plan batch64 64 512 256; plan latency_b1 1 128 128; plan throughput 0 1024 1024; save plans
