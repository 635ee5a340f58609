#!/usr/bin/env bash
# Round 9's last call (carry .gpu-deps; ~400 s of budget were left after the helpers' runs): the tensor-core FP8
# decode ("mma") and the asynchronous FP8 prefill staging against the twin (kernels_attention_fp8_gpu_test, all
# three decode layouts), attention_bench with an FP8 cache (mma, then narrow), a 256-sequence 1024/128 run in FP8
# (mma) and bf16, doctor and the FP8 1,000 prompts while time lasts.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
call_begin r9c conveyor attention_bench kernels_attention_fp8_gpu_test || exit 1
CONVEYOR_REQUIRE_GPU=1 timeout 90 build/tests/kernels_attention_fp8_gpu_test > $r/attention_fp8_test.log 2>&1
ok=$?; save "attention fp8 test rc=$ok $(grep -E '^\[  (PASSED|FAILED) ' $r/attention_fp8_test.log | head -3 | tr '\n' ' ')"
grep -E "Failure|differ|FP8 decode|FAILED  \]" $r/attention_fp8_test.log | head -12
for L in mma narrow; do
  CONVEYOR_FP8_DECODE=$L timeout 60 build/benchmarks/attention_bench --kv-cache-dtype fp8 --json $r/attention_fp8kv_$L.json \
    > $r/attention_fp8kv_$L.txt 2>&1
  save "attention fp8 kv $L rc=$? $(python3 -c "import json; d={x['name']: x for x in json.load(open('$r/attention_fp8kv_$L.json'))}; print(*(f\"{n} {d[n]['time_us']:.1f} us {d[n]['GB/s']:.0f} GB/s\" for n in ('decode_b64_ctx4096', 'decode_b16_ctx16384', 'decode_b256_ctx1536', 'decode_b1_ctx4096')), f\"prefill 8k {d['prefill_8192_wgmma']['TFLOP/s']}\", sep='; ')" 2>&1 | tail -1)"
done
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
f8=(--quantization fp8 --kv-cache-dtype fp8)
for tag in fp8 bf16; do
  q=(); [ $tag = fp8 ] && q=("${f8[@]}")
  timeout 90 build/conveyor bench latency "${m[@]}" "${q[@]}" --input-len 1024 --output-len 128 --batch-size 256 \
    --num-iters-warmup 1 --num-iters 1 --output-json $r/b256_$tag.json > $r/b256_$tag.txt 2>&1
  save "b256 1024/128 $tag rc=$? $(grep -E 'Avg latency|TTFT' $r/b256_$tag.txt | tr '\n' ' ')"
done
[ $ok = 0 ] || exit 0  # a kernel off its twin: no workload numbers from it
[ "$(left)" -gt 150 ] && timeout $(($(left) - 5)) build/conveyor bench throughput "${m[@]}" "${f8[@]}" --input-len 1024 \
  --output-len 1024 --num-prompts 1000 --output-json $r/throughput.fp8.json > $r/t1000_fp8.txt 2>&1
save "1000 prompts fp8 rc=$? $(grep -iE 'batch from memory|Throughput|TTFT' $r/t1000_fp8.txt | tr '\n' ' ' | cut -c1-300)"
