#!/usr/bin/env bash
# Ran in round 22 (../../nvidia-h100/2026-12-07-r22); the switches it times have since been made the rule or removed.
# Round 22's first call (any GPU; carry .gpu-deps; ~560 s in full, its parts in order of worth). Round 19's ncu of a
# batch-256 FP8 step (H100) put ~1.3 ms of its 13.5 ms in small kernels; round 22 changes three of them, each behind
# an A/B switch until measured:
#   CONVEYOR_ROPE_GROUPS=0     the old rope + KV write grid (256 CTAs of all 40 heads at 256 tokens: 12.6 us for
#                              ~6 MB); default now: the fewest heads a CTA that keep ~16 CTAs an SM (5 at 256 tokens);
#   CONVEYOR_GREEDY_DIRECT=0   the old greedy sampler (prepare_kernel copies all logits, 109 us a step, then select
#                              reads the copy); default now: greedy rows without penalties take their argmax and the
#                              NaN / +inf check from the logits in one pass;
#   CONVEYOR_WIDE_MAX_ROWS=N   rows up to which the SwiGLU quantizer takes the wide spread (32 today; 15.6 us for
#                              18.4 MB at batch 256): timed alone by fp8_quant_bench at 32 and 512.
# (1) The GPU tests of the three kernels and the FP8 stage test. (2) fp8_quant_bench at 32 / 512. (3) Batch 256 FP8,
# 128 in / 512 out (decode-heavy), all three old / new / old / new (new takes 512 where the bench says it wins).
# (4) CONVEYOR_DECODE_MMA_4CTA 0 / 1 / 0 / 1 on the same workload. Then call_r22b.sh.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
call_begin r22 conveyor stages_cuda_fp8_gpu_test kernels_rope_gpu_test kernels_sampling_gpu_test \
  kernels_fp8_gpu_test kernels_fp8_fused_input_gpu_test fp8_quant_bench || exit 1
run_tests kernels_rope_gpu_test kernels_sampling_gpu_test kernels_fp8_gpu_test kernels_fp8_fused_input_gpu_test
CONVEYOR_TEST_FP8_GEMV=auto CONVEYOR_REQUIRE_GPU=1 timeout 200 build/tests/stages_cuda_fp8_gpu_test \
  > "$r/stages_cuda_fp8_gpu_test.log" 2>&1
save "fp8 stage test rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$r/stages_cuda_fp8_gpu_test.log" | tr '\n' ' ')"
for n in 32 512; do
  CONVEYOR_WIDE_MAX_ROWS=$n timeout 60 build/benchmarks/fp8_quant_bench --json "$r/fp8_quant_bench.wide$n.json" \
    > "$r/fp8_quant_bench.wide$n.txt" 2>&1
  save "fp8_quant_bench wide $n rc=$? $(grep 'silu_mul_quantize hot.*rows=256 ' "$r/fp8_quant_bench.wide$n.txt" |
    grep -oE '"time_us": [0-9.]+')"
done
us() { grep "silu_mul_quantize hot.*rows=256 " "$r/fp8_quant_bench.wide$1.txt" | grep -oE '"time_us": [0-9.]+' |
  grep -oE '[0-9.]+$' || echo 1e9; }
wide=32; python3 -c "import sys; sys.exit(0 if $(us 512) < $(us 32) else 1)" && wide=512
save "wide rows for the new set: $wide"
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16 --quantization fp8
  --kv-cache-dtype fp8)
b256() {  # `b256 TAG I VAR=VALUE...`: batch 256 FP8, 128 in / 512 out, under the given environment
  local tag=$1 i=$2; shift 2
  [ "$(left)" -lt 60 ] && { save "no time left for b256 $tag $i"; return; }
  env "$@" timeout 100 build/conveyor bench latency "${m[@]}" --input-len 128 --output-len 512 --batch-size 256 \
    --num-iters-warmup 1 --num-iters 3 --output-json "$r/latency_b256.$tag.$i.json" > "$r/b256.$tag.$i.txt" 2>&1
  save "b256 fp8 $tag $i ($*) rc=$? $(grep -iE 'Avg latency' "$r/b256.$tag.$i.txt")"
}
old=(CONVEYOR_ROPE_GROUPS=0 CONVEYOR_GREEDY_DIRECT=0 CONVEYOR_WIDE_MAX_ROWS=32)
new=(CONVEYOR_ROPE_GROUPS=1 CONVEYOR_GREEDY_DIRECT=1 CONVEYOR_WIDE_MAX_ROWS=$wide)
b256 small 1 "${old[@]}"; b256 small 2 "${new[@]}"; b256 small 3 "${old[@]}"; b256 small 4 "${new[@]}"
for i in 1 2 3 4; do b256 mma4 $i CONVEYOR_DECODE_MMA_4CTA=$((1 - i % 2)) "${new[@]}"; done
