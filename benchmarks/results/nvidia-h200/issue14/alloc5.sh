#!/usr/bin/env bash
# Issue 14 item 4 on one H200: build, the GPU tests (one rank), b1/b64 twice.
set -o pipefail
source .gpu-deps/unpack.sh
t0=$(date +%s)
cmake -S . -B build -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 -DCONVEYOR_WERROR=ON > $OUT/build.log 2>&1 && ninja -C build -j16 >> $OUT/build.log 2>&1 || { tail -40 $OUT/build.log; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
CONVEYOR_REQUIRE_GPU=1 timeout 240 ctest --test-dir build -L gpu -LE mpi -E smollm2 --output-on-failure -j2 > $OUT/ctest_gpu.log 2>&1; echo "ctest gpu rc=$?"; grep -E "tests passed|Failed|\*\*\*|Passed" $OUT/ctest_gpu.log | tail -20
grep -B2 -A12 "allocation API calls inside" $OUT/ctest_gpu.log | head -60
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
for r in 1 2; do
  build/conveyor bench throughput "${m[@]}" --input-len 512 --output-len 256 --num-prompts 64 --max-num-seqs 64 --output-json $OUT/b64_$r.json > $OUT/b64_$r.log 2>&1; echo "b64 $r rc=$? $(grep -E 'Throughput' $OUT/b64_$r.log)"
  build/conveyor bench latency "${m[@]}" --input-len 128 --output-len 128 --batch-size 1 --num-iters-warmup 3 --num-iters 10 --output-json $OUT/b1_$r.json > $OUT/b1_$r.log 2>&1; echo "b1 $r rc=$? $(grep -iE 'avg latency|tok/s' $OUT/b1_$r.log | head -2 | tr '\n' ' ')"
done
grep -iE "memory|kv|slab|pool" $OUT/b64_1.log | head -20
echo "total $(( $(date +%s) - t0 )) s"
