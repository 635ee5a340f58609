# Round 9, call 2: an H200 came (budget_left 431 s before it; 198.4 s wall). Carry .gpu-deps.
export BUDGET_S=320; bash benchmarks/results/nvidia-h200/next/call_r9c.sh
