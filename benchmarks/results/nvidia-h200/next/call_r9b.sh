#!/usr/bin/env bash
# Round 9's second call (carry .gpu-deps): the FP8 kernels written after round 9's first call, each against its
# CPU twin, then what they buy. (1) build; the GPU tests of the FP8 attention (tensor-core decode "mma", narrow,
# wide; the ws prefill's asynchronous FP8 staging), of the FP8 GEMM (cuBLASLt outer-vector scaling to bf16,
# the vectorized quantizer) and the bf16 attention; (2) attention_bench with an FP8 cache, mma against narrow
# decode; (3) a 256-sequence decode: bench latency 1024/128 (prefill first, so TPOT p50 is mostly decode steps)
# in FP8 (mma, narrow) and bf16; (4) doctor (its FP8 decode line) and the FP8 1,000 prompts 1024/1024 with the
# simulator's prediction from that doctor.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
r=/tmp/r9b; mkdir -p $r
save() { tar czf "$OUT/r9b.tgz" -C /tmp r9b; echo "[$(el)] $*"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $r/gpu.txt
(cmake -S . -B build -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCONVEYOR_WERROR=OFF && \
  ninja -C build -j16 conveyor attention_bench kernels_attention_fp8_gpu_test kernels_fp8_gpu_test \
  kernels_attention_gpu_test) > $r/build.log 2>&1 || { grep -B2 -A12 -m3 "error" $r/build.log; save "build FAILED"; exit 1; }
save build
for t in kernels_attention_fp8_gpu_test kernels_fp8_gpu_test kernels_attention_gpu_test; do
  CONVEYOR_REQUIRE_GPU=1 timeout 150 build/tests/$t > $r/$t.log 2>&1
  save "$t rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $r/$t.log | head -3 | tr '\n' ' ')"
  grep -E "Failure|differ|FAILED  \]" $r/$t.log | head -8
done
bench() {  # <tag> <env...>: attention_bench with an FP8 cache
  local tag=$1; shift
  env "$@" timeout 60 build/benchmarks/attention_bench --kv-cache-dtype fp8 --json $r/attention_fp8kv_$tag.json \
    > $r/attention_fp8kv_$tag.txt 2>&1
  save "attention fp8 kv $tag rc=$? $(python3 -c "import json; d={x['name']: x for x in json.load(open('$r/attention_fp8kv_$tag.json'))}; print(*(f\"{n} {d[n]['time_us']:.1f} us {d[n]['GB/s']:.0f} GB/s\" for n in ('decode_b64_ctx4096', 'decode_b16_ctx16384', 'decode_b256_ctx1536') if n in d), f\"prefill 8k {d['prefill_8192_wgmma']['TFLOP/s']}\", sep='; ')" 2>&1 | tail -1)"
}
bench mma CONVEYOR_FP8_DECODE=mma
bench narrow CONVEYOR_FP8_DECODE=narrow
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
f8=(--quantization fp8 --kv-cache-dtype fp8)
step() {  # <tag> <env...> -- <conveyor args...>: 256 sequences, 1024 in, 128 out
  local tag=$1; shift; local e=(); while [ "$1" != -- ]; do e+=("$1"); shift; done; shift
  env "${e[@]}" timeout 120 build/conveyor bench latency "${m[@]}" "$@" --input-len 1024 --output-len 128 \
    --batch-size 256 --num-iters-warmup 1 --num-iters 2 --output-json $r/b256_$tag.json > $r/b256_$tag.txt 2>&1
  save "b256 $tag rc=$? $(grep -E 'Avg latency|TTFT' $r/b256_$tag.txt | tr '\n' ' ')"
}
step fp8_mma CONVEYOR_FP8_DECODE=mma -- "${f8[@]}"
step fp8_narrow CONVEYOR_FP8_DECODE=narrow -- "${f8[@]}"
step bf16 X=1 --
timeout 100 build/conveyor doctor --output-json $r/doctor.json > $r/doctor.log 2>&1
save "doctor rc=$? $(grep -E 'decode attention|prefill attention' $r/doctor.log | tr -s ' ' | tr '\n' ' ')"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && echo h200 || echo h100)
printf 'name: 1 x %s (this call), FP8\nnodes: 1\ngpus_per_node: 1\ngpu: {preset: %s, doctor_json: %s}\nintra_node: nvlink-%s\nnetwork: ib-ndr-400\nprecision: fp8\n' \
  $gpu $gpu $r/doctor.json $gpu > $r/cluster_fp8.yaml
build/conveyor plan --cluster $r/cluster_fp8.yaml --set model.config=configs/models/llama-3-8b.yaml \
  --workload prompts=1000,input=1024,output=1024 --output-json $r/plan_fp8.json > $r/plan_fp8.txt 2>&1
save "plan fp8 rc=$? $(sed -n 6p $r/plan_fp8.txt | tr -s ' ')"
[ "$(left)" -gt 150 ] && timeout $(($(left) - 8)) build/conveyor bench throughput "${m[@]}" "${f8[@]}" --input-len 1024 \
  --output-len 1024 --num-prompts 1000 --output-json $r/throughput.fp8.json > $r/t1000_fp8.txt 2>&1
save "1000 prompts fp8 rc=$? $(grep -iE 'batch from memory|Throughput|TTFT' $r/t1000_fp8.txt | tr '\n' ' ' | cut -c1-300)"
