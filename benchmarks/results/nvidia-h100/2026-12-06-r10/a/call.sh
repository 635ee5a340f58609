#!/usr/bin/env bash
# Round 10's first call (carry .gpu-deps; ~560 s), issue 15 in the order of next/README.md: (1) build and the FP8
# GEMM / stage tests; (2) doctor, now with the FP8 linears (device.gemm_decode_fp8) and the tensor-core FP8 decode
# line, and the simulator's prediction of the FP8 1,000 prompts from it; (3) that run measured (round 9: 14,165.0
# on an H200); (4) batch 1 FP8 with cuBLASLt only and with the FP8 gemv raced (runtime.fp8_gemv=auto);
# (5) one FP8 decode step at 256 sequences kernel by kernel (Nsight Compute) while time lasts.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
call_begin r10a conveyor kernels_fp8_gpu_test stages_cuda_fp8_gpu_test kernels_gemv_gpu_test stages_cuda_graph_gpu_test \
  stages_cuda_golden_gpu_test kernels_attention_gpu_test kernels_attention_fp8_gpu_test kernels_rms_norm_gpu_test \
  kernels_silu_mul_gpu_test kernels_rope_gpu_test || exit 1
# The attention tests first without PDL: round 9's review moved both decode kernels' split bounds and
# output write into attention_device.cuh after its last GPU call.
for t in kernels_attention_gpu_test kernels_attention_fp8_gpu_test kernels_fp8_gpu_test stages_cuda_fp8_gpu_test; do
  CONVEYOR_REQUIRE_GPU=1 timeout 120 build/tests/$t > $r/$t.log 2>&1
  save "$t rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $r/$t.log | head -2 | tr '\n' ' ')"
done
# Programmatic dependent launch of a decode layer's kernels (kernels/cuda/pdl.cuh, opt-in, written in round 9):
# their tests and the graph / golden model tests with it, then batch 1 bf16 without and with it (issue 16 asks
# >= 229 tok/s).
pdl_ok=1
for t in kernels_gemv_gpu_test kernels_fp8_gpu_test kernels_attention_gpu_test kernels_attention_fp8_gpu_test \
  kernels_rms_norm_gpu_test kernels_silu_mul_gpu_test kernels_rope_gpu_test stages_cuda_graph_gpu_test \
  stages_cuda_golden_gpu_test; do
  CONVEYOR_PDL=1 CONVEYOR_REQUIRE_GPU=1 timeout 150 build/tests/$t > $r/${t}_pdl.log 2>&1 || pdl_ok=0
  save "$t with PDL rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $r/${t}_pdl.log | head -2 | tr '\n' ' ')"
done
mb=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
for p in 0 1; do
  [ $p = 1 ] && [ $pdl_ok = 0 ] && continue
  CONVEYOR_PDL=$p timeout 100 build/conveyor bench latency "${mb[@]}" --input-len 128 --output-len 128 --batch-size 1 \
    --num-iters-warmup 3 --num-iters 10 --output-json $r/latency_b1.bf16.pdl$p.json > $r/b1_bf16_pdl$p.txt 2>&1
  save "b1 bf16 PDL=$p rc=$? $(grep -iE 'Avg latency' $r/b1_bf16_pdl$p.txt | head -1)"
done
timeout 150 build/conveyor doctor --output-json $r/doctor.json > $r/doctor.log 2>&1
save "doctor rc=$? $(grep -E 'FP8 linear|decode attention|prefill' $r/doctor.log | tr -s ' ' | tr '\n' ' ' | cut -c1-600)"
save "plan fp8 1000: $(plan_here fp8 fp8 prompts=1000,input=1024,output=1024)"
save "plan bf16 1000: $(plan_here bf16 bf16 prompts=1000,input=1024,output=1024)"
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
f8=(--quantization fp8 --kv-cache-dtype fp8)
timeout 200 build/conveyor bench throughput "${m[@]}" "${f8[@]}" --input-len 1024 --output-len 1024 --num-prompts 1000 \
  --output-json $r/throughput.fp8.json > $r/t1000_fp8.txt 2>&1
save "1000 prompts fp8 rc=$? $(grep -iE 'Throughput|TTFT' $r/t1000_fp8.txt | tr '\n' ' ' | cut -c1-300)"
for g in off auto; do
  timeout 100 build/conveyor bench latency "${m[@]}" "${f8[@]}" --input-len 128 --output-len 128 --batch-size 1 \
    --num-iters-warmup 3 --num-iters 10 --set logging.level=debug --set runtime.fp8_gemv=$g \
    --output-json $r/latency_b1.fp8.gemv_$g.json > $r/b1_fp8_gemv_$g.txt 2>&1
  save "b1 fp8 gemv $g rc=$? $(grep -iE 'Avg latency' $r/b1_fp8_gemv_$g.txt | head -1)"
done
grep -iE "e4m3: (gemv|cublaslt)" $r/b1_fp8_gemv_auto.txt | head -8
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
[ "$(left)" -gt 110 ] && timeout $(($(left) - 10)) $ncu --profile-from-start off --clock-control none \
  --metrics gpu__time_duration.sum --csv --log-file $r/ncu_step_fp8.csv build/conveyor bench latency "${m[@]}" "${f8[@]}" \
  --input-len 1024 --output-len 48 --batch-size 256 --num-iters-warmup 0 --num-iters 1 --set runtime.profile_step=40 \
  > $r/ncu_step_fp8.txt 2>&1 && python3 benchmarks/ncu_breakdown.py $r/ncu_step_fp8.csv --json $r/breakdown_fp8.json \
  > $r/breakdown_fp8.txt 2>&1; gzip -f $r/ncu_step_fp8.csv 2>/dev/null
save "fp8 decode step: $(head -9 $r/breakdown_fp8.txt 2>/dev/null | tr -s ' ' | tr '\n' ' ' | cut -c1-500)"
