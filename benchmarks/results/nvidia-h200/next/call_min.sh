#!/usr/bin/env bash
# call_wgmma.sh cut to what a short budget allows (carry .gpu-deps): build; per schedule, the bf16/f16 attention
# test (each prefill case against the CPU twin with both kernels) and attention_bench; then the FP8-cache test
# and doctor with the fastest schedule that passed. Every step saves $OUT/wg.tgz, so a cut call keeps the rest.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
call_begin wg kernels_attention_gpu_test kernels_attention_fp8_gpu_test attention_bench || exit 1
tflops() { python3 -c "import json,sys; print(next(x['TFLOP/s'] for x in json.load(open(sys.argv[1])) if x['name']==sys.argv[2]))" "$1" "$2" 2>/dev/null || echo 0; }
best=overlap; bestv=0
for pp in ws ws_pingpong overlap sync; do
  CONVEYOR_WGMMA_SCHEDULE=$pp CONVEYOR_REQUIRE_GPU=1 timeout 100 build/tests/kernels_attention_gpu_test > $r/${pp}_test.log 2>&1
  rc=$?
  save "$pp test rc=$rc $(grep -E 'PASSED|FAILED' $r/${pp}_test.log | head -3 | tr '\n' ' ')"
  grep -E "differ|Failure" $r/${pp}_test.log | head -4
  [ $rc = 0 ] || continue  # a failed (or hung) schedule is not benchmarked
  CONVEYOR_WGMMA_SCHEDULE=$pp timeout 60 build/benchmarks/attention_bench --json $r/${pp}_attention.json > $r/${pp}_attention.txt 2>&1
  w=$(tflops $r/${pp}_attention.json prefill_8192_wgmma)
  save "$pp bench rc=$? 8k wgmma $w mma.sync $(tflops $r/${pp}_attention.json prefill_8192_mma_sync) 4k $(tflops $r/${pp}_attention.json prefill_4096_wgmma) 16k $(tflops $r/${pp}_attention.json prefill_16384_wgmma)"
  [ $rc = 0 ] && python3 -c "import sys; sys.exit(0 if float('$w') > float('$bestv') else 1)" && { best=$pp; bestv=$w; }
done
echo "$best $bestv" > $r/CHOSEN; save "chosen $best $bestv"
CONVEYOR_WGMMA_SCHEDULE=$best CONVEYOR_REQUIRE_GPU=1 timeout 60 build/tests/kernels_attention_fp8_gpu_test > $r/${best}_fp8_test.log 2>&1
save "fp8 test $best $(grep -E 'PASSED|FAILED' $r/${best}_fp8_test.log | head -2 | tr '\n' ' ')"
[ -n "${MIN_NO_DOCTOR:-}" ] && exit 0  # the caller runs doctor itself
ninja -C build -j16 conveyor > $r/build_conveyor.log 2>&1; save "conveyor build rc=$?"
CONVEYOR_PREFILL_ATTENTION=wgmma CONVEYOR_WGMMA_SCHEDULE=$best timeout 100 build/conveyor doctor --output-json $r/doctor.json > $r/doctor.log 2>&1
save "doctor rc=$? $(grep -iE 'prefill attention' $r/doctor.log | head -3 | tr '\n' ' ')"
