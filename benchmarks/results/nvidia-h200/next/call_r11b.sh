#!/usr/bin/env bash
# Round 11's second call (on the machine call_r11a.sh left warm, else it builds; carry .gpu-deps; ~330 s; the GPU
# tests and attention_bench first): issue 15's
# 1,000 prompts >= 18,000. The simulator, from round 10's H200 doctor with precision fp8, predicts 13,949 (round 12;
# 14,283 before) at the auto batch (256, the decode graphs' cap), 15,129 at max_num_seqs 384 and 15,826 at 512 (those steps run eagerly; the
# H200's FP8 KV holds ~886 sequences of 2,048). stage_options.h keeps the auto batch at the graph cap until a
# measurement says a larger eager one wins: this is that measurement, each run beside the simulator's figure.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
r=/tmp/r11b; mkdir -p $r
save() { tar czf "$OUT/r11b.tgz" -C /tmp r11b; echo "[$(el)] $*"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $r/gpu.txt
# The GPU tests that load weights through CudaOps::adopt / adopt_fp8 (WeightBank's reused buffers, round 10).
(cmake -S . -B build -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCONVEYOR_WERROR=OFF &&
  ninja -C build -j16 conveyor stages_cuda_golden_gpu_test stages_cuda_fp8_gpu_test attention_bench) > $r/build.log 2>&1 ||
  { save "build FAILED"; exit 1; }
for t in stages_cuda_golden_gpu_test stages_cuda_fp8_gpu_test; do
  CONVEYOR_REQUIRE_GPU=1 timeout 90 build/tests/$t > $r/$t.log 2>&1
  save "$t rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $r/$t.log | head -2 | tr '\n' ' ')"
done
# Issue 16: attention_bench's ws kernel on an H200 beside doctor's 397.4 TFLOP/s at 8k (round 10).
timeout 100 build/benchmarks/attention_bench --json $r/attention.json > $r/attention.txt 2>&1
save "attention_bench rc=$? $(grep -iE 'prefill' $r/attention.txt | head -6 | tr '\n' ' ' | cut -c1-400)"
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16 --quantization fp8
  --kv-cache-dtype fp8 --input-len 1024 --output-len 1024 --num-prompts 1000)
for n in 512 auto; do
  [ "$(left)" -lt 100 ] && { save "no time left for max_num_seqs $n"; continue; }
  s=(); [ $n = auto ] || s=(--max-num-seqs $n)
  timeout $(($(left) - 10)) build/conveyor bench throughput "${m[@]}" "${s[@]}" --output-json $r/throughput.fp8.seqs_$n.json \
    > $r/t1000_fp8_seqs_$n.txt 2>&1
  save "fp8 1000 prompts max_num_seqs $n rc=$? $(grep -iE 'Throughput|TTFT|preempt' $r/t1000_fp8_seqs_$n.txt | tr '\n' ' ' | cut -c1-300)"
done
