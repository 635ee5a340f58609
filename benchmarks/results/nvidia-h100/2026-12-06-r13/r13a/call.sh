#!/usr/bin/env bash
# Round 13's first call on an H100 or H200 (no needs_h200; carry .gpu-deps; ~570 s). (1) The fused FP8 input
# quantizers' test with silu_mul_quantize's wide rows (round 12: a few rows spread over up to 448 threads of 4
# packs, not yet GPU-run; the codes must equal the two-kernel path's bit for bit) and the FP8 stage test; (2) batch 1
# 128/128 FP8 with the wide rows and without (CONVEYOR_WIDE_HELD_ROWS=0; round 12's ncu put silu_mul_quantize at 6%
# of the step's kernel time); (3) on an H200: attention_bench (issue 16), batch 1 bf16 (issue 16: >= 229 with PDL
# on), the FP8 1,000 prompts at 512 and auto (the simulator, round 12: 13,949 at auto on an H200).
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
tests=(kernels_fp8_fused_input_gpu_test kernels_fp8_gpu_test stages_cuda_fp8_gpu_test)
call_begin r13a conveyor attention_bench "${tests[@]}" || exit 1
run_tests "${tests[@]}"
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16 --quantization fp8
  --kv-cache-dtype fp8)
latency_ab fp8 CONVEYOR_WIDE_HELD_ROWS 1 0 1 -- "${m[@]}"
if ! grep -q H200 $r/gpu.txt; then  # an H100: the rest of the call goes to every GPU test (ctest -L gpu)
  [ "$(left)" -lt 150 ] && { save "no time left for ctest -L gpu"; exit 0; }
  ninja -C build -j16 > $r/build_all.log 2>&1; save "build all rc=$?"
  CONVEYOR_REQUIRE_GPU=1 timeout $(($(left) - 15)) ctest --test-dir build -L gpu -E nccl_communicator --timeout 120 \
    > $r/ctest_gpu.log 2>&1
  save "ctest -L gpu rc=$? $(grep -E 'tests passed|tests failed' $r/ctest_gpu.log) $(grep -E '\*\*\*Failed|Timeout' $r/ctest_gpu.log | head -5 | tr '\n' ' ')"
  exit 0
fi
timeout 100 build/benchmarks/attention_bench --json $r/attention.json > $r/attention.txt 2>&1
save "attention_bench rc=$? $(grep -iE 'prefill' $r/attention.txt | head -6 | tr '\n' ' ' | cut -c1-400)"
mb=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
latency_ab bf16 CONVEYOR_PDL 1 -- "${mb[@]}"
for n in 512 auto; do
  [ "$(left)" -lt 110 ] && { save "no time left for max_num_seqs $n"; continue; }
  s=(); [ $n = auto ] || s=(--max-num-seqs $n)
  timeout $(($(left) - 10)) build/conveyor bench throughput "${m[@]}" "${s[@]}" --input-len 1024 --output-len 1024 \
    --num-prompts 1000 --output-json $r/throughput.fp8.seqs_$n.json > $r/t1000_fp8_seqs_$n.txt 2>&1
  save "fp8 1000 prompts max_num_seqs $n rc=$? $(grep -iE 'Throughput|TTFT|preempt' $r/t1000_fp8_seqs_$n.txt | tr '\n' ' ' | cut -c1-300)"
done
