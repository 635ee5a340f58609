#!/usr/bin/env bash
# Issue 14 on one H200: old main (073ba0d, .gpurun/old) vs this tree; GPU tests of this tree, then
# b1/b64 pairs alternating old/new (ABBA order per round) until the time budget is spent.
set -o pipefail
source .gpu-deps/unpack.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt
t0=$(date +%s)
cfg="-G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 -DCONVEYOR_WERROR=ON"
(cmake -S .gpurun/old -B /tmp/build-old $cfg -DCONVEYOR_BUILD_TESTS=OFF -DCONVEYOR_BUILD_BENCHMARKS=OFF && ninja -C /tmp/build-old -j6 conveyor) > /tmp/build_old.log 2>&1 &
(cmake -S . -B build $cfg && ninja -C build -j12) > $OUT/build_new.log 2>&1 || tail -30 $OUT/build_new.log
wait
echo "builds $(( $(date +%s) - t0 )) s"; ls /tmp/build-old/conveyor build/conveyor || { tail -20 /tmp/build_old.log; exit 1; }
CONVEYOR_REQUIRE_GPU=1 timeout 200 ctest --test-dir build -L gpu -LE mpi -E smollm2 --output-on-failure > $OUT/ctest_gpu.log 2>&1; echo "ctest gpu rc=$?"; grep -E "tests passed|Failed|\*\*\*|Passed" $OUT/ctest_gpu.log | tail -20
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
echo '[' > $OUT/ab.json; sep=""
run() {  # run <variant> <workload> <round>
  local b=build/conveyor; [ $1 = old ] && b=/tmp/build-old/conveyor
  local j=/tmp/$2_$1_$3.json
  if [ $2 = b1 ]; then $b bench latency "${m[@]}" --input-len 128 --output-len 128 --batch-size 1 --num-iters-warmup 3 --num-iters 10 --output-json $j > /tmp/log 2>&1
  else $b bench throughput "${m[@]}" --input-len 512 --output-len 256 --num-prompts 64 --max-num-seqs 64 --output-json $j > /tmp/log 2>&1; fi
  local rc=$?; echo "$2 $1 $3 rc=$rc $(grep -iE 'avg latency|Throughput|output tok' /tmp/log | head -2 | tr '\n' ' ')"
  [ -f $j ] && { printf '%s{"variant":"%s","workload":"%s","round":%s,"result":' "$sep" $1 $2 $3 >> $OUT/ab.json; cat $j >> $OUT/ab.json; echo '}' >> $OUT/ab.json; sep=","; }
}
r=1
while [ $(( $(date +%s) - t0 )) -lt 390 ]; do
  if [ $((r % 2)) = 1 ]; then order="old new"; else order="new old"; fi
  for v in $order; do run $v b64 $r; done
  for v in $order; do run $v b1 $r; done
  r=$((r+1))
done
echo ']' >> $OUT/ab.json
echo "total $(( $(date +%s) - t0 )) s"
