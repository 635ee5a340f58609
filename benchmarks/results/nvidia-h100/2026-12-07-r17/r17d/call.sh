#!/usr/bin/env bash
# Round 17's third call (any GPU, an H200 for (3); carry .gpu-deps; ~200 s, BUDGET_S=280): is the Fp8Half gemv
# as close to the twin as cuBLASLt?
# Under runtime.fp8_gemv=auto the FP8 KV stage test failed (r17c). (1) kernels_fp8_gpu_test's SmallM case prints the
# largest error over sum|ab| of the gemv and of cuBLASLt on the same shapes. (2) The stage test with every decode
# linear through the gemv (CONVEYOR_TEST_FP8_GEMV=on), then auto, then the default (cuBLASLt).
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
call_begin r17d kernels_fp8_gpu_test stages_cuda_fp8_gpu_test || exit 1
CONVEYOR_REQUIRE_GPU=1 timeout 120 build/tests/kernels_fp8_gpu_test --gtest_filter='*SmallM*' > $r/small_m.log 2>&1
save "small m rc=$?"; grep -E "largest error" $r/small_m.log
for g in on auto off; do
  CONVEYOR_TEST_FP8_GEMV=$g CONVEYOR_REQUIRE_GPU=1 timeout 120 build/tests/stages_cuda_fp8_gpu_test \
    > $r/stage_$g.log 2>&1
  save "stage test gemv=$g rc=$? $(grep -E 'tokens equal|NOT a tie' $r/stage_$g.log |
    sed 's/ tokens equal the CPU twin.s before any tie//' | tr '\n' ';' | cut -c1-900)"
done
# (3) On an H200: attention_bench (issue 16: >= 350 TFLOP/s at 8k) and batch 1 bf16 (>= 229).
call_begin r17d conveyor attention_bench || exit 1
timeout 100 build/benchmarks/attention_bench --json $r/attention.json > $r/attention.txt 2>&1
save "attention_bench rc=$? $(grep -oE '"name": "prefill_(4096|8192|16384)".*"TFLOP/s": [0-9.]+' $r/attention.txt |
  sed 's/"shape".*"TFLOP/TFLOP/' | tr '\n' ' ')"
latency_ab bf16 CONVEYOR_PDL 1 -- --load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16
