#!/usr/bin/env bash
# Device call A of the verification round (carry .gpu-deps .smolA): unpack the Debian packages, build,
# keep the first piece of the SmolLM2 GGUF (zstd, split in three to fit the 64 MiB transfer) in /tmp.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
cp .smolA/p /tmp/smolA
cmake -S . -B build -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 -DCONVEYOR_WERROR=OFF > /tmp/build.log 2>&1 &&
  ninja -C build -j16 >> /tmp/build.log 2>&1 || { grep -B2 -A10 -m5 "error" /tmp/build.log; exit 1; }
echo "build $(el)"
