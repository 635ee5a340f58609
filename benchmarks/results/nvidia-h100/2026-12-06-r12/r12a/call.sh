#!/usr/bin/env bash
# Round 12's first call (H100 or H200, no needs_h200; carry .gpu-deps; ~580 s). (1) The GPU tests of the kernels
# PDL launches (every kernel signals after its wait since round 11; not yet GPU-run that way) and the FP8 tests,
# with the FP8 gemv's two row tiles at m <= 8 (round 12: at k = 4096 one tile left each warp one chunk, nothing to
# double-buffer); (2) batch 1 128/128 FP8 with runtime.fp8_gemv off (cuBLASLt), auto (raced per shape; the race
# is logged) and on; bf16 batch 1 with the gemv's L2 prefetch before its PDL wait and without; an ncu breakdown
# of one FP8 batch-1 decode step; (3) on an H200, attention_bench's ws kernel (issue 16); (4) the FP8 1,000 prompts at
# max_num_seqs 512 if the time is left (the simulator: +10.8% over auto on an H200).
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
tests=(kernels_fp8_gpu_test kernels_gemv_gpu_test kernels_fp8_fused_input_gpu_test kernels_rms_norm_gpu_test
  kernels_silu_mul_gpu_test kernels_rope_gpu_test stages_cuda_fp8_gpu_test stages_cuda_graph_gpu_test)
call_begin r12a conveyor attention_bench "${tests[@]}" || exit 1
run_tests "${tests[@]}"
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16 --quantization fp8
  --kv-cache-dtype fp8)
for g in off auto on; do
  [ "$(left)" -lt 60 ] && { save "no time left for b1 fp8 gemv=$g"; continue; }
  timeout 100 build/conveyor bench latency "${m[@]}" --input-len 128 --output-len 128 --batch-size 1 \
    --num-iters-warmup 3 --num-iters 10 --set logging.level=debug --set runtime.fp8_gemv=$g \
    --output-json $r/latency_b1.fp8.gemv_$g.json > $r/b1_fp8_gemv_$g.txt 2>&1
  save "b1 fp8 gemv=$g rc=$? $(grep -iE 'Avg latency' $r/b1_fp8_gemv_$g.txt)"
done
grep -iE "e4m3: (gemv|cublaslt)" $r/b1_fp8_gemv_auto.txt | sort -u | head -8
# bf16 batch 1 (issue 16: >= 229 tok/s on an H200) with the gemv's first weights prefetched into L2 before its PDL
# wait (round 12) and without (CONVEYOR_GEMV_PREFETCH=0).
mb=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
for p in 1 0 1; do
  [ "$(left)" -lt 60 ] && { save "no time left for b1 bf16 prefetch=$p"; continue; }
  CONVEYOR_GEMV_PREFETCH=$p timeout 100 build/conveyor bench latency "${mb[@]}" --input-len 128 --output-len 128 \
    --batch-size 1 --num-iters-warmup 3 --num-iters 10 --output-json $r/latency_b1.bf16.prefetch$p.json \
    > $r/b1_bf16_prefetch$p.txt 2>&1
  save "b1 bf16 prefetch=$p rc=$? $(grep -iE 'Avg latency' $r/b1_bf16_prefetch$p.txt)"
done
# Each kernel of one batch-1 FP8 decode step (step 40 of 128 + 64) with the faster gemv setting: where the 4.2 ms
# of a token go against the 1.9 ms of its bytes.
best=$(for g in off auto on; do python3 -c "import json; print(json.load(open('$r/latency_b1.fp8.gemv_$g.json'))['avg_latency'], '$g')" 2>/dev/null; done | sort -n | head -1 | cut -d' ' -f2)
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
if [ -n "$best" ] && [ "$(left)" -gt 150 ]; then
  timeout 120 $ncu --profile-from-start off --clock-control none --cache-control none --metrics gpu__time_duration.sum \
    --csv --log-file $r/ncu_b1_fp8.csv build/conveyor bench latency "${m[@]}" --set runtime.fp8_gemv=$best \
    --input-len 128 --output-len 64 --batch-size 1 --num-iters 1 --num-iters-warmup 0 --set runtime.profile_step=40 \
    > $r/ncu_b1_fp8.txt 2>&1
  python3 benchmarks/ncu_breakdown.py $r/ncu_b1_fp8.csv --json $r/ncu_b1_fp8.json > $r/breakdown_b1_fp8.txt 2>&1
  gzip -f $r/ncu_b1_fp8.csv
  save "breakdown b1 fp8 gemv=$best: $(head -12 $r/breakdown_b1_fp8.txt | tr -s ' ' | tr '\n' ' ' | cut -c1-600)"
fi
if grep -q H200 $r/gpu.txt && [ "$(left)" -gt 120 ]; then
  timeout 100 build/benchmarks/attention_bench --json $r/attention.json > $r/attention.txt 2>&1
  save "attention_bench rc=$? $(grep -iE 'prefill' $r/attention.txt | head -6 | tr '\n' ' ' | cut -c1-400)"
fi
if [ "$(left)" -gt 150 ]; then
  timeout $(($(left) - 10)) build/conveyor bench throughput "${m[@]}" --input-len 1024 --output-len 1024 \
    --num-prompts 1000 --max-num-seqs 512 --output-json $r/throughput.fp8.seqs_512.json > $r/t1000_fp8_seqs_512.txt 2>&1
  save "fp8 1000 prompts max_num_seqs 512 rc=$? $(grep -iE 'Throughput|TTFT|preempt' $r/t1000_fp8_seqs_512.txt | tr '\n' ' ' | cut -c1-300)"
fi
