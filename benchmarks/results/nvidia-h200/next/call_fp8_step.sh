#!/usr/bin/env bash
# (Round 9: 256 x 1,024 prompt tokens are 32 prefill steps of 8,192, so step 40 is a decode step; round 9 profiled
# a prefill step with 1,536-token prompts and step 20.)
# Issue 15's next GPU call (carry .gpu-deps): where an FP8 decode step at 256 sequences spends its time
# (round 9's H200 ran the FP8 1,000 prompts at 14,165 output tok/s, TPOT p50 17.7 ms). (1) the FP8 attention
# test, every decode layout against the CPU twin; (2) attention_bench with an FP8 cache: narrow and wide decode
# (ws prefill; mma is in every run), and narrow under the overlap prefill schedule; (3) 256 sequences of
# 1,024 + 48 tokens: FP8 weights + KV (mma, then narrow decode) and bf16, the wall time (bench latency), then
# each kernel of one FP8 and one bf16 decode step (Nsight Compute on runtime.profile_step, ncu_breakdown.py);
# (4) the FP8 1,000 prompts at max_num_seqs 448 (eager above the 256-sequence graphs) with the faster layout.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
call_begin f8s conveyor attention_bench kernels_attention_fp8_gpu_test || exit 1
CONVEYOR_REQUIRE_GPU=1 timeout 120 build/tests/kernels_attention_fp8_gpu_test > $r/fp8_test.log 2>&1
rc=$?; wide_ok=$([ $rc = 0 ] && echo 1 || echo 0)
save "fp8 attention test (narrow and wide) rc=$rc $(grep -E 'PASSED|FAILED' $r/fp8_test.log | head -2 | tr '\n' ' ')"
grep -E "Failure|differ|layout" $r/fp8_test.log | head -6
bench() {  # <tag> <env...>: attention_bench with an FP8 cache
  local tag=$1; shift
  env "$@" timeout 60 build/benchmarks/attention_bench --kv-cache-dtype fp8 --json $r/attention_fp8kv_$tag.json \
    > $r/attention_fp8kv_$tag.txt 2>&1
  save "attention fp8 kv $tag rc=$? $(python3 -c "import json; d={x['name']: x for x in json.load(open('$r/attention_fp8kv_$tag.json'))}; print(*(f\"{n} {d[n]['time_us']:.1f} us {d[n]['GB/s']:.0f} GB/s\" for n in ('decode_b64_ctx4096', 'decode_b16_ctx16384')), f\"prefill 8k {d['prefill_8192_wgmma']['TFLOP/s']}\", sep='; ')" 2>&1 | tail -1)"
}
timeout 100 build/conveyor doctor --output-json $r/doctor.json > $r/doctor.log 2>&1  # with the FP8 decode line
save "doctor rc=$? $(grep -E 'decode attention' $r/doctor.log | tr -s ' ' | tr '\n' ' ')"
bench narrow_ws CONVEYOR_FP8_DECODE=narrow
[ $wide_ok = 1 ] && bench wide_ws CONVEYOR_FP8_DECODE=wide
bench narrow_overlap CONVEYOR_FP8_DECODE=narrow CONVEYOR_WGMMA_SCHEDULE=overlap
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
f8=(--quantization fp8 --kv-cache-dtype fp8)
declare -A tpot
step() {  # <tag> <env...> -- <conveyor args...>: one 256-sequence decode step's wall time
  local tag=$1; shift; local e=(); while [ "$1" != -- ]; do e+=("$1"); shift; done; shift
  env "${e[@]}" timeout 150 build/conveyor bench latency "${m[@]}" "$@" --input-len 1024 --output-len 48 \
    --batch-size 256 --num-iters-warmup 1 --num-iters 3 --output-json $r/step_$tag.json > $r/step_$tag.txt 2>&1
  tpot[$tag]=$(grep -oE 'TPOT p50 [0-9.]+' $r/step_$tag.txt | head -1 | awk '{print $3 * 1000}')
  save "b256 $tag rc=$? TPOT p50 ${tpot[$tag]} ms"
}
step fp8_mma CONVEYOR_FP8_DECODE=mma -- "${f8[@]}"
step fp8_narrow CONVEYOR_FP8_DECODE=narrow -- "${f8[@]}"
step bf16 X=1 --
for tag in fp8_mma bf16; do
  [ "$(left)" -lt 120 ] && continue
  q=(); [ $tag = fp8_mma ] && q=("${f8[@]}")
  timeout 150 $ncu --profile-from-start off --clock-control none \
    --metrics gpu__time_duration.sum --csv --log-file $r/ncu_step_$tag.csv build/conveyor bench latency "${m[@]}" \
    "${q[@]}" --input-len 1024 --output-len 48 --batch-size 256 --num-iters-warmup 0 --num-iters 1 \
    --set runtime.profile_step=40 > $r/ncu_step_$tag.txt 2>&1
  python3 benchmarks/ncu_breakdown.py $r/ncu_step_$tag.csv ${tpot[$tag]:+--step-ms ${tpot[$tag]}} \
    --json $r/breakdown_$tag.json > $r/breakdown_$tag.txt 2>&1
  gzip -f $r/ncu_step_$tag.csv
  save "breakdown $tag: $(head -8 $r/breakdown_$tag.txt | tr -s ' ' | tr '\n' ' ' | cut -c1-400)"
done
layout=mma
python3 -c "import sys; sys.exit(0 if float('${tpot[fp8_narrow]:-1e9}') < float('${tpot[fp8_mma]:-0}') else 1)" && layout=narrow
[ "$(left)" -gt 170 ] && CONVEYOR_FP8_DECODE=$layout timeout $(($(left) - 8)) build/conveyor bench throughput "${m[@]}" \
  "${f8[@]}" --input-len 1024 --output-len 1024 --num-prompts 1000 --max-num-seqs 448 \
  --output-json $r/throughput.fp8.seqs448.$layout.json > $r/t1000_fp8_448_$layout.txt 2>&1
save "1000 prompts fp8 ($layout decode) max_num_seqs 448 rc=$? $(grep -iE 'batch as|batch from|Throughput|TTFT' $r/t1000_fp8_448_$layout.txt 2>/dev/null | tr '\n' ' ' | cut -c1-300)"
# The simulator's FP8 prediction of the same run from this machine's doctor (now with its FP8 decode line).
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && echo h200 || echo h100)
printf 'name: 1 x %s (this call), FP8\nnodes: 1\ngpus_per_node: 1\ngpu: {preset: %s, doctor_json: %s}\nintra_node: nvlink-%s\nnetwork: ib-ndr-400\nprecision: fp8\n' \
  $gpu $gpu $r/doctor.json $gpu > $r/cluster_fp8.yaml
build/conveyor plan --cluster $r/cluster_fp8.yaml --set model.config=configs/models/llama-3-8b.yaml \
  --workload prompts=1000,input=1024,output=1024,max_num_seqs=448 --output-json $r/plan_fp8_448.json > $r/plan_fp8_448.txt 2>&1
save "plan fp8 448 rc=$? $(sed -n 6p $r/plan_fp8_448.txt | tr -s ' ')"
