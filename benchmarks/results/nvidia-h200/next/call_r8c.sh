#!/usr/bin/env bash
# Round 8, call 3 (carry .gpu-deps): the bf16 workloads of benchmarks/suite_h200.sh (batch 1 128/128, batch 64
# 512/256, the 1,000 prompts 1024/1024) with the ws prefill kernel now the default; no HF peers (time).
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
r=/tmp/r8c; mkdir -p $r/suite
save() { tar czf "$OUT/r8c.tgz" -C /tmp r8c; echo "[$(el)] $*"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $r/gpu.txt
(cmake -S . -B build -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCONVEYOR_WERROR=OFF && ninja -C build -j16 conveyor) \
  > $r/build.log 2>&1 || { tail -20 $r/build.log; save "build FAILED"; exit 1; }
save build
for st in throughput b64 latency; do
  SUITE_OUT=$r/suite NUM_PROMPTS=1000 timeout $(($(left) - 10)) bash benchmarks/suite_h200.sh $st > $r/suite_$st.log 2>&1
  save "$st rc=$? $(grep -hiE 'Throughput:|tok/s|TTFT p50|Avg latency' $r/suite_$st.log | head -4 | tr '\n' ' ' | cut -c1-300)"
done
