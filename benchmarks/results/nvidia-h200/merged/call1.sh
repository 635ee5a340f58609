#!/usr/bin/env bash
# Merged main on one H200: build, the GPU suite with mpi, issue 17's layout comparisons, then the CPU
# suite (-LE gpu; the SmolLM2 file is not on this machine) until the time is spent.
set -o pipefail
source .gpu-deps/unpack.sh; for f in .gpu-deps/libxxhash*.deb; do dpkg -x "$f" /opt/conveyor-deps; done; sed -i "s|^prefix=/usr|prefix=/opt/conveyor-deps/usr|" /opt/conveyor-deps/usr/lib/x86_64-linux-gnu/pkgconfig/libxxhash.pc
export PATH=/usr/local/cuda/bin:$PATH CONVEYOR_CACHE=$PWD/.gpurun/cache
t0=$(date +%s)
cmake -S . -B build -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 -DCONVEYOR_WERROR=OFF > $OUT/build.log 2>&1 && ninja -C build -j16 >> $OUT/build.log 2>&1 || { grep -B2 -A8 "error" $OUT/build.log | head -60; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
CONVEYOR_REQUIRE_GPU=1 timeout 140 ctest --test-dir build -L gpu -E smollm2 --output-on-failure --timeout 130 -j3 > $OUT/ctest_gpu.log 2>&1; echo "ctest gpu rc=$? $(( $(date +%s) - t0 )) s"
grep -E "tests passed|\*\*\*|Failed|Not Run" $OUT/ctest_gpu.log | tail -30
(timeout 140 bash .gpurun/layouts.sh > $OUT/layouts.log 2>&1; echo "layouts rc=$?") &
timeout 140 ctest --test-dir build -LE gpu -E "smollm2|cli_|faults_|slurm" --timeout 130 -j12 > $OUT/ctest_cpu.log 2>&1; echo "ctest cpu rc=$? $(( $(date +%s) - t0 )) s"
wait
grep -E "tests passed|\*\*\*|Failed|Not Run" $OUT/ctest_cpu.log | tail -30
cat $OUT/summary.txt 2>/dev/null | tail -30
echo "total $(( $(date +%s) - t0 )) s"
