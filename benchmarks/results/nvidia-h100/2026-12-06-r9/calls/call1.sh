# Round 9, call 1 (nvidia-h100-x1 came; carry .gpu-deps), 556.7 s wall:
export t0=$(date +%s); MIN_NO_DOCTOR=1 bash benchmarks/results/nvidia-h200/next/call_min.sh; bash benchmarks/results/nvidia-h200/next/call_fp8_step.sh
