#!/usr/bin/env bash
# Round 23's first call (any GPU; carry .gpu-deps; ~560 s, its parts in order of worth). The batch-256 FP8 decode
# step's largest kernel is the tensor-core decode attention: 6,716 us of round 22's 12,937 us step (H100), reading
# its cache at 2.66 TB/s of 3.35; the 4-CTA variant that filled its last wave made no difference (rounds 21, 22).
# (1) The attention kernel tests under the default grid and CONVEYOR_DECODE_HEADS_FIRST=1 (a token's KV heads
# adjacent in launch order, so the CTAs resident together read whole cache rows; compile-checked only so far).
# (2) attention_bench (FP8 and bf16 caches): batch 256 x 1,536 and 64 x 4k decode in both orders. Batch 256 FP8
# 128 in / 512 out, CONVEYOR_DECODE_HEADS_FIRST 0 / 1 / 0 / 1. (3) ncu --set full over two
# decode_mma_kernel launches of a batch-256 FP8 decode step (1024 in, step 40): DRAM throughput, issue slots,
# eligible warps, where the warps stall (ncu_stalls.py). (4) On an H200: issue 15's 1,000 prompts FP8.
# Then call_r23b.sh.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
call_begin r23 conveyor kernels_attention_gpu_test kernels_attention_fp8_gpu_test attention_bench || exit 1
run_tests kernels_attention_fp8_gpu_test kernels_attention_gpu_test
for t in kernels_attention_fp8_gpu_test kernels_attention_gpu_test; do
  CONVEYOR_DECODE_HEADS_FIRST=1 CONVEYOR_REQUIRE_GPU=1 timeout 120 build/tests/$t > "$r/$t.heads_first.log" 2>&1
  save "$t heads-first rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$r/$t.heads_first.log" | head -2 | tr '\n' ' ')"
done
for kv in fp8 auto; do  # the decode cases token-major and heads-first, side by side
  timeout 120 build/benchmarks/attention_bench --kv-cache-dtype $kv --json $r/attention_bench.$kv.json \
    > $r/attention_bench.$kv.txt 2>&1
  save "attention_bench $kv rc=$? $(grep -E 'decode_b(256_ctx1536|64_ctx4096)' $r/attention_bench.$kv.txt |
    grep -oE '"name": "[a-z0-9_]+"|"GB/s": [0-9.]+' | tr '\n' ' ')"
done
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16 --quantization fp8
  --kv-cache-dtype fp8)
b256_ab hf CONVEYOR_DECODE_HEADS_FIRST 0 1 0 1 -- "${m[@]}"
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
[ "$(left)" -gt 150 ] && timeout $(($(left) - 60)) $ncu --profile-from-start off --set full -k regex:decode_mma_kernel \
  --launch-count 2 -o $r/attn_full build/conveyor bench latency "${m[@]}" --input-len 1024 --output-len 48 \
  --batch-size 256 --num-iters 1 --num-iters-warmup 0 --set runtime.profile_step=40 > $r/ncu_attn.txt 2>&1
save "ncu attention rc=$?"
ncu_pages attn
save "summary"
grep -q H200 "$r/gpu.txt" && throughput_seqs fp8 auto -- "${m[@]}"
