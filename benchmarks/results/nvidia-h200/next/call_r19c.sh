#!/usr/bin/env bash
# Round 19's short call (any GPU; carry .gpu-deps; ~150 s, BUDGET_S=200): part (1) of call_r19b.sh alone, the FP8
# stage test with the escalating twin ensemble at CONVEYOR_TEST_FP8_GEMV=off and =auto.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
call_begin r19c stages_cuda_fp8_gpu_test || exit 1
for p in off auto; do
  CONVEYOR_TEST_FP8_GEMV=$p CONVEYOR_REQUIRE_GPU=1 timeout $(($(left) / 2 + 20)) build/tests/stages_cuda_fp8_gpu_test \
    > $r/stages_cuda_fp8_gpu_test.$p.log 2>&1
  save "fp8 stage test $p rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $r/stages_cuda_fp8_gpu_test.$p.log | tr '\n' ' ')"
done
grep -hE "NOT a tie|teacher-forced" $r/stages_cuda_fp8_gpu_test.*.log | cut -c1-200
