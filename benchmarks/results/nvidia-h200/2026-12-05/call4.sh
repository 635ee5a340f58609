#!/usr/bin/env bash
# Round 2, device call 4 (carry .gpu-deps .smolA; a fresh machine): build this tree.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
cp .smolA/p /tmp/smolA
(cmake -S . -B build -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 -DCONVEYOR_WERROR=OFF && ninja -C build -j16) > /tmp/build.log 2>&1 ||
  { grep -B2 -A10 -m5 "error" /tmp/build.log; exit 1; }
echo "build $(el)"
