#!/usr/bin/env bash
# A/B on one H200: build the previous main (.gpurun/old, 073ba0d) and this tree side by side, GPU tests
# of this tree, then b1 and b64 of each, alternating (old, new, old, new).
set -o pipefail
source .gpu-deps/unpack.sh
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt
t0=$(date +%s)
if [ "$1" = build ]; then
cfg="-G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 -DCONVEYOR_WERROR=ON -DCONVEYOR_BUILD_TESTS=OFF"
(cmake -S .gpurun/old -B /tmp/build-old $cfg && ninja -C /tmp/build-old -j8 conveyor) > $OUT/build_old.log 2>&1 &
(cmake -S . -B build -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 -DCONVEYOR_WERROR=ON && ninja -C build -j10) > $OUT/build_new.log 2>&1 || { tail -40 $OUT/build_new.log; }
wait
echo "builds $(( $(date +%s) - t0 )) s"; ls -la /tmp/build-old/conveyor build/conveyor || exit 1
CONVEYOR_REQUIRE_GPU=1 timeout 240 ctest --test-dir build -L gpu -LE mpi -E smollm2 --output-on-failure > $OUT/ctest_gpu.log 2>&1; echo "ctest gpu rc=$?"; grep -E "tests passed|Failed|\*\*\*" $OUT/ctest_gpu.log
fi
if [ "$1" = bench ] || [ "$1" = both ]; then
[ -x /tmp/build-old/conveyor ] || { cfg="-G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 -DCONVEYOR_WERROR=ON -DCONVEYOR_BUILD_TESTS=OFF -DCONVEYOR_BUILD_BENCHMARKS=OFF"; (cmake -S .gpurun/old -B /tmp/build-old $cfg && ninja -C /tmp/build-old -j8 conveyor) > $OUT/build_old.log 2>&1 & (cmake -S . -B build $cfg && ninja -C build -j8 conveyor) > $OUT/build_new.log 2>&1; wait; echo "builds $(( $(date +%s) - t0 )) s"; }
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
for round in 1 2; do for v in old new; do
  [ $(( $(date +%s) - t0 )) -gt 480 ] && break 2
  b=build/conveyor; [ $v = old ] && b=/tmp/build-old/conveyor
  $b bench latency "${m[@]}" --input-len 128 --output-len 128 --batch-size 1 --num-iters-warmup 3 --num-iters 10 --output-json $OUT/b1_${v}_$round.json > /tmp/b1_$v.log 2>&1; echo "b1 $v $round rc=$? $(grep -i 'avg latency' /tmp/b1_$v.log)"
  $b bench throughput "${m[@]}" --input-len 512 --output-len 256 --num-prompts 64 --max-num-seqs 64 --output-json $OUT/b64_${v}_$round.json > /tmp/b64_$v.log 2>&1; echo "b64 $v $round rc=$? $(grep Throughput /tmp/b64_$v.log)"
done; done
fi
echo "total $(( $(date +%s) - t0 )) s"
