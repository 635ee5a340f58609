#!/usr/bin/env bash
# Issue 15's next GPU call (carry .gpu-deps): why the FP8 1,000 prompts run at ~9,000 output tok/s on an H100
# (TPOT p50 28 ms at 256 sequences, where KV and weight bytes give ~12 ms). (1) attention_bench with an FP8
# cache under the ws and overlap prefill schedules (ws converts FP8 tiles in its producer warpgroup); (2) one
# decode step of 256 sequences at ~1,550 tokens of context, bf16 and FP8 weights + FP8 KV: its wall time
# (bench latency) and its kernels one by one (Nsight Compute on runtime.profile_step, ncu_breakdown.py).
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
r=/tmp/f8s; mkdir -p $r
save() { tar czf "$OUT/f8s.tgz" -C /tmp f8s; echo "[$(el)] $*"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $r/gpu.txt
(cmake -S . -B build -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCONVEYOR_WERROR=OFF && \
  ninja -C build -j16 conveyor attention_bench) > $r/build.log 2>&1 || { tail -20 $r/build.log; save "build FAILED"; exit 1; }
save build
for pp in ws overlap; do
  CONVEYOR_WGMMA_SCHEDULE=$pp timeout 60 build/benchmarks/attention_bench --kv-cache-dtype fp8 \
    --json $r/attention_fp8kv_$pp.json > $r/attention_fp8kv_$pp.txt 2>&1
  save "attention fp8 kv $pp rc=$? $(grep -oE '"name": "(prefill_8192_wgmma|decode_b64_ctx4096)".*"TFLOP/s": [0-9.]+|"GB/s": [0-9.]+' $r/attention_fp8kv_$pp.txt | head -4 | tr '\n' ' ' | cut -c1-300)"
done
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
step=(--input-len 1536 --output-len 32 --batch-size 256 --num-iters-warmup 1 --num-iters 3)
for prec in fp8 bf16; do
  q=(); [ $prec = fp8 ] && q=(--quantization fp8 --kv-cache-dtype fp8)
  timeout 150 build/conveyor bench latency "${m[@]}" "${q[@]}" "${step[@]}" --output-json $r/step_$prec.json \
    > $r/step_$prec.txt 2>&1
  tpot=$(grep -oE 'TPOT p50 [0-9.]+' $r/step_$prec.txt | head -1 | awk '{print $3 * 1000}')
  save "b256 $prec rc=$? TPOT p50 ${tpot} ms"
  [ "$(left)" -lt 120 ] && continue
  timeout 150 $ncu --profile-from-start off --clock-control none --metrics gpu__time_duration.sum --csv \
    --log-file $r/ncu_step_$prec.csv build/conveyor bench latency "${m[@]}" "${q[@]}" --input-len 1536 \
    --output-len 24 --batch-size 256 --num-iters-warmup 0 --num-iters 1 --set runtime.profile_step=20 \
    > $r/ncu_step_$prec.txt 2>&1
  python3 benchmarks/ncu_breakdown.py $r/ncu_step_$prec.csv ${tpot:+--step-ms $tpot} \
    --json $r/breakdown_$prec.json > $r/breakdown_$prec.txt 2>&1
  gzip -f $r/ncu_step_$prec.csv
  save "breakdown $prec: $(head -8 $r/breakdown_$prec.txt | tr -s ' ' | tr '\n' ' ' | cut -c1-400)"
done
# The batch cap: an auto batch stops at the largest decode graph (256 sequences) although the H100's FP8 KV
# holds 450 of 2,048; a larger --max-num-seqs runs those steps eagerly. Does the 1,000-prompt run gain?
f8=(--quantization fp8 --kv-cache-dtype fp8)
[ "$(left)" -gt 170 ] && timeout $(($(left) - 8)) build/conveyor bench throughput "${m[@]}" "${f8[@]}" --input-len 1024 \
  --output-len 1024 --num-prompts 1000 --max-num-seqs 448 --output-json $r/throughput.fp8.seqs448.json > $r/t1000_fp8_448.txt 2>&1
save "1000 prompts fp8 max_num_seqs 448 rc=$? $(grep -iE 'batch as|batch from|Throughput|TTFT' $r/t1000_fp8_448.txt | tr '\n' ' ' | cut -c1-300)"
