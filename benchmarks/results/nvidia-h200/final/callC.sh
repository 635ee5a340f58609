#!/usr/bin/env bash
# Device call C of the verification round (carry .smolC .whl; calls A and B left /tmp/smolA, /tmp/smolB
# and the build): the SmolLM2 GGUF reassembled (zstandard wheel), then every GPU test
# (CONVEYOR_REQUIRE_GPU=1 ctest -L gpu, the gpu;mpi ones included), then batch 1 bf16 and FP8.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
mkdir -p /tmp/r
source benchmarks/results/nvidia-h200/final/gguf_from_pieces.sh
ninja -C build -j16 > /tmp/r/build.log 2>&1 || { tail -30 /tmp/r/build.log; exit 1; }
echo "build $(el)"
CONVEYOR_REQUIRE_GPU=1 timeout $(($(left) - 70)) ctest --test-dir build -L gpu --output-on-failure --timeout 200 -j3 \
  > /tmp/r/ctest_gpu.log 2>&1
echo "ctest -L gpu rc=$? $(el)"
grep -E "tests passed|\*\*\*|Failed|Passed" /tmp/r/ctest_gpu.log | tail -30
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16 --input-len 128 --output-len 128
   --batch-size 1 --num-iters-warmup 2 --num-iters 5)
for v in bf16 fp8; do
  q=(); [ $v = fp8 ] && q=(--quantization fp8 --kv-cache-dtype fp8)
  [ "$(left)" -gt 30 ] && timeout $(($(left) - 5)) build/conveyor bench latency "${m[@]}" "${q[@]}" \
    --output-json /tmp/r/latency_b1.$v.json > /tmp/r/latency_b1.$v.txt 2>&1
  echo "b1 $v rc=$? $(el)"
done
tar czf "$OUT/verify.tgz" -C /tmp r
echo "done $(el)"
