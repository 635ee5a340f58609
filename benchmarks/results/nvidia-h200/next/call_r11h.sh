#!/usr/bin/env bash
# Round 11 on an H100, or warm on the H200 after call_r11a.sh (carry .gpu-deps; ~480 s; on an H200 also
# attention_bench): the fused FP8 input quantizers (rms_norm /
# silu_mul writing the FP8 linears' codes, round 11, not yet GPU-run). (1) their test against the two-kernel
# path, the norm and SwiGLU kernels' own tests (refactored onto row_ops.cuh), the FP8 and golden stage tests
# (which also load weights through WeightBank's reused buffers, round 10); (2) FP8 batch 1 128/128 with the
# fusion and without (CONVEYOR_FUSED_FP8_INPUT=0); bf16 batch 1 with PDL signalled after the wait and without;
# (3) the FP8 1,000 prompts 1024/1024 at the auto batch, beside round 10's 12,283.6 on an H100 (no fusion).
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
tests=(kernels_fp8_fused_input_gpu_test kernels_rms_norm_gpu_test kernels_silu_mul_gpu_test kernels_fp8_gpu_test
  stages_cuda_fp8_gpu_test stages_cuda_golden_gpu_test)
call_begin r11h conveyor attention_bench "${tests[@]}" || exit 1
if grep -q H200 $r/gpu.txt; then  # issue 16: attention_bench's ws kernel on an H200 (doctor read 397.4 at 8k, round 10)
  timeout 100 build/benchmarks/attention_bench --json $r/attention.json > $r/attention.txt 2>&1
  save "attention_bench rc=$? $(grep -iE 'prefill' $r/attention.txt | head -6 | tr '\n' ' ' | cut -c1-400)"
fi
run_tests "${tests[@]}"
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16 --quantization fp8
  --kv-cache-dtype fp8)
for f in 1 0; do
  [ "$(left)" -lt 60 ] && { save "no time left for b1 fp8 fused=$f"; continue; }
  CONVEYOR_FUSED_FP8_INPUT=$f timeout 100 build/conveyor bench latency "${m[@]}" --input-len 128 --output-len 128 \
    --batch-size 1 --num-iters-warmup 3 --num-iters 10 --output-json $r/latency_b1.fp8.fused$f.json \
    > $r/b1_fp8_fused$f.txt 2>&1
  save "b1 fp8 fused=$f rc=$? $(grep -iE 'Avg latency' $r/b1_fp8_fused$f.txt)"
done
# PDL with the signal after the wait (round 11; round 10 signalled first and measured -0.7% on an H100).
mb=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
for p in 1 0; do
  [ "$(left)" -lt 60 ] && { save "no time left for b1 bf16 PDL=$p"; continue; }
  CONVEYOR_PDL=$p timeout 100 build/conveyor bench latency "${mb[@]}" --input-len 128 --output-len 128 --batch-size 1 \
    --num-iters-warmup 3 --num-iters 10 --output-json $r/latency_b1.bf16.pdl$p.json > $r/b1_bf16_pdl$p.txt 2>&1
  save "b1 bf16 PDL=$p rc=$? $(grep -iE 'Avg latency' $r/b1_bf16_pdl$p.txt)"
done
for n in auto; do
  [ "$(left)" -lt 110 ] && { save "no time left for max_num_seqs $n"; continue; }
  s=(); [ $n = auto ] || s=(--max-num-seqs $n)
  CONVEYOR_FUSED_FP8_INPUT=1 timeout $(($(left) - 10)) build/conveyor bench throughput "${m[@]}" "${s[@]}" --input-len 1024 --output-len 1024 \
    --num-prompts 1000 --output-json $r/throughput.fp8.seqs_$n.json > $r/t1000_fp8_seqs_$n.txt 2>&1
  save "fp8 1000 prompts max_num_seqs $n rc=$? $(grep -iE 'Throughput|TTFT|preempt' $r/t1000_fp8_seqs_$n.txt | tr '\n' ' ' | cut -c1-300)"
done
