#!/usr/bin/env bash
# Round 16's one call (any GPU; an H200 for the issue figures; carry .gpu-deps; ~520 s, BUDGET_S=560): what
# call_r15d.sh and call_r15a.sh asked, in the order of what is worth most when the time runs out.
# (1) The cold decode races (CONVEYOR_COLD_GEMM_TUNE=1, never run on a GPU): the runner's, the step allocations'
# and the golden tests with them on; the bf16 GEMM choices cold and warm (a short debug run each).
# (2) Batch 1 bf16 128/128 cold, warm, cold (PDL on, the default): the faster of the two is used from here on.
# (3) attention_bench (issue 16: its ws kernel on an H200). (4) Batch 1 bf16 with PDL off (issue 16 asks >= 229
# on an H200). (5) Batch 1 FP8 (issue 15 asks >= 426). (6) The FP8 1,000 prompts at the auto batch, then at 512.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
tests=(kernels_gemm_gpu_test stages_cuda_step_alloc_gpu_test stages_cuda_golden_gpu_test)
call_begin r16 conveyor attention_bench "${tests[@]}" || exit 1
CONVEYOR_COLD_GEMM_TUNE=1 run_tests "${tests[@]}"
mb=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
for c in 1 0; do
  CONVEYOR_COLD_GEMM_TUNE=$c timeout 60 build/conveyor bench latency "${mb[@]}" --input-len 16 --output-len 4 \
    --batch-size 1 --num-iters-warmup 0 --num-iters 1 --set logging.level=debug > $r/choices_bf16_cold$c.txt 2>&1
  save "choices cold=$c rc=$? $(grep -E '^m=1 ' $r/choices_bf16_cold$c.txt | cut -c1-90 | tr '\n' ';' | cut -c1-500)"
done
latency_ab bf16 CONVEYOR_COLD_GEMM_TUNE 1 0 1 -- "${mb[@]}"
# The cold races win where both cold runs beat the warm one.
cold=$(python3 - "$r" <<'EOF'
import json, sys
lat = []
for i in (1, 2, 3):
    try:
        lat.append(json.load(open(f"{sys.argv[1]}/latency_b1.bf16.{i}.json"))["avg_latency"])
    except (OSError, KeyError, ValueError):
        lat.append(None)
print(1 if None not in lat and max(lat[0], lat[2]) < lat[1] else 0)
EOF
)
export CONVEYOR_COLD_GEMM_TUNE=$cold
save "cold races from here on: $cold"
timeout 100 build/benchmarks/attention_bench --json $r/attention.json > $r/attention.txt 2>&1
save "attention_bench rc=$? $(grep -iE 'prefill' $r/attention.txt | head -6 | tr '\n' ' ' | cut -c1-400)"
latency_ab bf16_pdl CONVEYOR_PDL 0 -- "${mb[@]}"
m=("${mb[@]}" --quantization fp8 --kv-cache-dtype fp8)
latency_ab fp8 CONVEYOR_PDL 1 -- "${m[@]}"
throughput_seqs fp8 auto 512 -- "${m[@]}"
