#!/usr/bin/env bash
# The next GPU round's second call, on the machine call_wgmma.sh or call_r8b.sh left warm (no carry): issue 15's FP8 rows
# beside the bf16 ones with the prefill kernel call_wgmma.sh chose (/tmp/wg/CHOSEN): batch 1 128/128 in
# bf16 and in FP8 weights + FP8 KV (logging.level=debug: each GEMM shape's gemv/cuBLASLt choice), then the
# 1,000 prompts 1024/1024 in FP8 weights + FP8 KV while time lasts.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
r=/tmp/f8; mkdir -p $r
save() { tar czf "$OUT/f8.tgz" -C /tmp f8; echo "[$(el)] $*"; }
[ -f /tmp/wg/CHOSEN ] && { set -- $(cat /tmp/wg/CHOSEN); export CONVEYOR_WGMMA_SCHEDULE=$1; }  # "schedule TFLOP/s"
[ -x build/conveyor ] || { (cmake -S . -B build -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a && ninja -C build -j16) > $r/build.log 2>&1; save "build rc=$?"; }
echo "prefill: ${CONVEYOR_PREFILL_ATTENTION:-auto} ${CONVEYOR_WGMMA_SCHEDULE:-}" | tee $r/CHOSEN
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $r/gpu.txt
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
f8=(--quantization fp8 --kv-cache-dtype fp8)
timeout 100 build/conveyor bench latency "${m[@]}" --input-len 128 --output-len 128 --batch-size 1 --num-iters-warmup 3 \
  --num-iters 10 --output-json $r/latency_b1.bf16.json > $r/b1_bf16.txt 2>&1
save "b1 bf16 rc=$? $(grep -iE 'tok/s|Avg latency' $r/b1_bf16.txt | head -2 | tr '\n' ' ')"
timeout 100 build/conveyor bench latency "${m[@]}" "${f8[@]}" --input-len 128 --output-len 128 --batch-size 1 \
  --num-iters-warmup 3 --num-iters 10 --set logging.level=debug --output-json $r/latency_b1.fp8.json > $r/b1_fp8.txt 2>&1
save "b1 fp8 rc=$? $(grep -iE 'tok/s|Avg latency' $r/b1_fp8.txt | head -2 | tr '\n' ' ')"
grep -iE -A12 "GEMM choices" $r/b1_fp8.txt | head -14
# The FP8 gemv raced against cuBLASLt per shape (runtime.fp8_gemv=auto; the default is off until this is
# measured): issue 15's batch 1 asks >= 80% of the FP8 roofline, and cuBLASLt's e4m3 GEMM at m = 1 reads its
# weights at ~1.4 TB/s (round 9's helper: qkv 6144 x 4096 in 17.5 us with the epilogue).
timeout 100 build/conveyor bench latency "${m[@]}" "${f8[@]}" --input-len 128 --output-len 128 --batch-size 1 \
  --num-iters-warmup 3 --num-iters 10 --set logging.level=debug --set runtime.fp8_gemv=auto \
  --output-json $r/latency_b1.fp8.gemv_auto.json > $r/b1_fp8_gemv_auto.txt 2>&1
save "b1 fp8 gemv auto rc=$? $(grep -iE 'tok/s|Avg latency' $r/b1_fp8_gemv_auto.txt | head -2 | tr '\n' ' ')"
grep -iE "gemv|cublaslt" $r/b1_fp8_gemv_auto.txt | head -12
CONVEYOR_REQUIRE_GPU=1 timeout 120 build/tests/stages_cuda_fp8_gpu_test > $r/stages_fp8_test.log 2>&1
save "stages fp8 test rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $r/stages_fp8_test.log | head -2 | tr '\n' ' ')"
[ "$(left)" -gt 150 ] && timeout $(($(left) - 8)) build/conveyor bench throughput "${m[@]}" "${f8[@]}" --input-len 1024 \
  --output-len 1024 --num-prompts 1000 --output-json $r/throughput.fp8.json > $r/t1000_fp8.txt 2>&1
save "1000 prompts fp8 rc=$? $(grep -iE 'batch from memory|Throughput|TTFT' $r/t1000_fp8.txt | tr '\n' ' ' | cut -c1-300)"
