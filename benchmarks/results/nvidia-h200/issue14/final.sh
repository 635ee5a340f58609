#!/usr/bin/env bash
# Final GPU step for issue 14: build this tree (all targets) and the previous main (.gpurun/old,
# 073ba0d; conveyor only) side by side, the GPU tests of this tree, then b64 and b1 alternating
# new/old (new first this time).
set -o pipefail
source .gpu-deps/unpack.sh
t0=$(date +%s)
(cmake -S .gpurun/old -B /tmp/build-old -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 -DCONVEYOR_BUILD_TESTS=OFF -DCONVEYOR_BUILD_BENCHMARKS=OFF && ninja -C /tmp/build-old -j5 conveyor) > /tmp/build_old.log 2>&1 &
{ cmake -S . -B build -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 -DCONVEYOR_WERROR=ON && ninja -C build -j12; } > /tmp/build.log 2>&1 || { grep -E "error|FAILED" /tmp/build.log | head -40; exit 1; }
wait; echo "builds $(( $(date +%s) - t0 )) s"
CONVEYOR_REQUIRE_GPU=1 timeout 300 ctest --test-dir build -L gpu -LE mpi -E smollm2 --output-on-failure > $OUT/ctest_gpu.log 2>&1; echo "ctest gpu rc=$?"; grep -E "tests passed|Failed|\*\*\*|Passed|Not Run" $OUT/ctest_gpu.log | head -30
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
for round in 1 2; do for v in new old; do
  [ $(( $(date +%s) - t0 )) -gt 500 ] && break 2
  b=build/conveyor; [ $v = old ] && b=/tmp/build-old/conveyor
  $b bench throughput "${m[@]}" --input-len 512 --output-len 256 --num-prompts 64 --max-num-seqs 64 --output-json $OUT/b64_${v}_$round.json > /tmp/b64_$v.log 2>&1; echo "b64 $v $round rc=$? $(grep Throughput /tmp/b64_$v.log)"
  [ $round = 1 ] && { $b bench latency "${m[@]}" --input-len 128 --output-len 128 --batch-size 1 --num-iters-warmup 3 --num-iters 10 --output-json $OUT/b1_${v}.json > /tmp/b1_$v.log 2>&1; echo "b1 $v rc=$? $(grep -i 'avg latency' /tmp/b1_$v.log)"; }
done; done
grep -h "KV\|memory" /tmp/b64_new.log | head -8 > $OUT/b64_new_startup.txt
echo "total $(( $(date +%s) - t0 )) s"
