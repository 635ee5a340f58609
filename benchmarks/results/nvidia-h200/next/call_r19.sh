#!/usr/bin/env bash
# Round 19's first call (any GPU; carry .gpu-deps; ~420 s, BUDGET_S=480; written in round 18, which got no machine
# for it). The FP8 stage test now compares every step teacher-forced on the twin's tokens (greedy_forced /
# check_forced, >= 75% equal, no non-tie difference) with a 256-member twin ensemble; never GPU-run. (1) The FP8
# stage test at the default (off: cuBLASLt) and under CONVEYOR_TEST_FP8_GEMV=auto: if both pass, runtime.fp8_gemv
# goes to auto (schema.cpp, stage_options.h, cuda_ops.h). (2) Batch 1 FP8 auto / off / auto. (3) The GPU suite,
# as time allows. (4) ncu over one batch-1 FP8 step (auto) and one batch-256 FP8 decode step.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
call_begin r19 conveyor stages_cuda_fp8_gpu_test || exit 1
run_tests stages_cuda_fp8_gpu_test
CONVEYOR_TEST_FP8_GEMV=auto CONVEYOR_REQUIRE_GPU=1 timeout 150 build/tests/stages_cuda_fp8_gpu_test \
  > $r/stages_cuda_fp8_gpu_test.auto.log 2>&1
save "fp8 stage test auto rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $r/stages_cuda_fp8_gpu_test.auto.log | tr '\n' ' ')"
grep -hE "tokens equal the CPU twin|NOT a tie|forced step" $r/stages_cuda_fp8_gpu_test*.log | cut -c1-200
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16 --quantization fp8
  --kv-cache-dtype fp8)
latency_ab fp8auto X 1 -- "${m[@]}" --set runtime.fp8_gemv=auto
latency_ab fp8off X 1 -- "${m[@]}"
latency_ab fp8auto2 X 1 -- "${m[@]}" --set runtime.fp8_gemv=auto
[ "$(left)" -gt 120 ] && ninja -C build -j16 > $r/build_all.log 2>&1 &&
  (cd build && CONVEYOR_REQUIRE_GPU=1 timeout $(($(left) - 40)) ctest -L gpu \
  -E "smollm2|signal|communicator|stages_cuda_fp8" --timeout 100 -j2 > $r/ctest.log 2>&1)
save "gpu suite rc=$? $(grep -E 'tests passed|Failed|\*\*\*' $r/ctest.log | tr '\n' ' ' | cut -c1-400)"
# (4) ncu over one step (kernels alone): batch 1 FP8 under auto, one batch-256 FP8 decode step.
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
step() {
  local tag=$1; shift
  [ "$(left)" -lt 60 ] && { save "no time left for $tag"; return; }
  timeout $(($(left) - 10)) $ncu --profile-from-start off --clock-control none --cache-control none \
    --metrics gpu__time_duration.sum --csv --log-file $r/ncu_$tag.csv build/conveyor bench latency "${m[@]}" "$@" \
    --num-iters 1 --num-iters-warmup 0 --set runtime.profile_step=40 > $r/ncu_$tag.txt 2>&1
  python3 benchmarks/ncu_breakdown.py $r/ncu_$tag.csv --json $r/ncu_$tag.json > $r/breakdown_$tag.txt 2>&1
  gzip -f $r/ncu_$tag.csv
  save "ncu $tag: $(head -12 $r/breakdown_$tag.txt | tr -s ' ' | tr '\n' ' ' | cut -c1-600)"
}
step b1 --input-len 128 --output-len 64 --batch-size 1 --set runtime.fp8_gemv=auto
step b256 --input-len 1024 --output-len 48 --batch-size 256
