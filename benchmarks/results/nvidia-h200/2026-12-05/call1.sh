#!/usr/bin/env bash
# Device call 1 (carry .gpu-deps .smolA .oldsrc): unpack the Debian packages, build this tree (tests and
# benchmarks) and, beside it, the conveyor binary of the main before the restructuring (073ba0d, a
# `git archive` of it, tests/data and results left out, in .oldsrc/old.tgz) for issue 14's A/B; keep the first piece of the SmolLM2 GGUF in /tmp.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
cp .smolA/p /tmp/smolA
mkdir -p /tmp/old && tar xzf .oldsrc/old.tgz -C /tmp/old
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
cfg=(-G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 -DCONVEYOR_WERROR=OFF)
(cmake -S /tmp/old -B /tmp/build-old "${cfg[@]}" -DCONVEYOR_BUILD_TESTS=OFF -DCONVEYOR_BUILD_BENCHMARKS=OFF &&
  ninja -C /tmp/build-old -j5 conveyor) > /tmp/build_old.log 2>&1 &
(cmake -S . -B build "${cfg[@]}" && ninja -C build -j12) > /tmp/build.log 2>&1 || grep -B2 -A10 -m5 "error" /tmp/build.log
wait
ls -l build/conveyor /tmp/build-old/conveyor || { tail -20 /tmp/build_old.log; exit 1; }
echo "builds $(el)"
