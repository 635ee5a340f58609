#!/usr/bin/env bash
# Device call 3 (carry .smolC .whl; calls 1 and 2 left the builds, /tmp/smolA and /tmp/smolB): the SmolLM2
# GGUF reassembled, every GPU test (CONVEYOR_REQUIRE_GPU=1 ctest -L gpu, the gpu;mpi ones included), the
# issue-14 A/B (073ba0d vs this tree, batch 64 and batch 1, ABBA), the step timelines (batch 64 512/256 and
# batch 256 at 1024 tokens), batch 1 with FP8 weights (bf16 and FP8 KV; the small-m FP8 gemv), SmolLM2 perplexity bf16 / FP8 / FP8 with
# calculated KV scales. Everything lands in $OUT/r.tgz.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
r=/tmp/r; mkdir -p $r
source benchmarks/results/nvidia-h200/final/gguf_from_pieces.sh > $r/gguf.sha256; cat $r/gguf.sha256
CONVEYOR_REQUIRE_GPU=1 timeout 240 ctest --test-dir build -L gpu --output-on-failure --timeout 200 -j3 > $r/ctest_gpu.log 2>&1
echo "ctest -L gpu rc=$? $(el)"
grep -E "tests passed|\*\*\*|Failed|Passed" $r/ctest_gpu.log | tail -40
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
run() {  # run <old|new> <b1|b64> <round>
  local b=build/conveyor; [ $1 = old ] && b=/tmp/build-old/conveyor
  local j=$r/ab_$2_$1_$3.json
  if [ $2 = b1 ]; then timeout 90 $b bench latency "${m[@]}" --input-len 128 --output-len 128 --batch-size 1 --num-iters-warmup 3 --num-iters 10 --output-json $j > /tmp/log 2>&1
  else timeout 90 $b bench throughput "${m[@]}" --input-len 512 --output-len 256 --num-prompts 64 --max-num-seqs 64 --output-json $j > /tmp/log 2>&1; fi
  echo "$2 $1 $3 rc=$? $(grep -iE 'avg latency|Throughput' /tmp/log | head -2 | tr '\n' ' ')"
}
for i in 1 2; do
  o="old new"; [ $i = 2 ] && o="new old"
  for v in $o; do run $v b64 $i; done
  for v in $o; do run $v b1 $i; done
done
echo "A/B $(el)"
timeout 90 build/conveyor bench latency "${m[@]}" --input-len 512 --output-len 256 --batch-size 64 --num-iters-warmup 1 \
  --num-iters 3 --step-timeline $r/steps_b64.json --output-json $r/b64_latency.json > $r/b64_latency.txt 2>&1
echo "b64 step timeline rc=$? $(el)"; grep -A14 -i "step timeline" $r/b64_latency.txt | head -30
timeout 120 build/conveyor bench latency "${m[@]}" --input-len 1024 --output-len 128 --batch-size 256 --num-iters-warmup 1 \
  --num-iters 2 --step-timeline $r/steps_b256.json --output-json $r/b256_latency.json > $r/b256_latency.txt 2>&1
echo "b256 step timeline rc=$? $(el)"; grep -A14 -i "step timeline" $r/b256_latency.txt | head -30
for v in fp8w fp8; do  # FP8 weights with bf16 KV (last measured 239.1 tok/s, cuBLASLt at m = 1), then FP8 KV too
  q=(--quantization fp8); [ $v = fp8 ] && q+=(--kv-cache-dtype fp8)
  timeout 90 build/conveyor bench latency "${m[@]}" --input-len 128 --output-len 128 --batch-size 1 --num-iters-warmup 3 \
    --num-iters 10 "${q[@]}" --output-json $r/b1_$v.json > $r/b1_$v.txt 2>&1
  echo "b1 $v rc=$? $(el)"; grep -iE "avg latency|Throughput|roofline" $r/b1_$v.txt | head -3
done
p=(--model "$g" --file tests/data/perplexity/text.txt --ctx-size 512 --set runtime.backend=cuda)
for v in bf16 fp8 fp8calc; do
  q=(); [ $v != bf16 ] && q=(--quantization fp8 --kv-cache-dtype fp8); [ $v = fp8calc ] && q+=(--calculate-kv-scales)
  [ "$(left)" -gt 40 ] && timeout $(($(left) - 20)) build/conveyor perplexity "${p[@]}" "${q[@]}" --output-json $r/ppl_$v.json \
    > $r/ppl_$v.txt 2>&1
  echo "ppl $v rc=$? $(el) $(grep -E "Final" $r/ppl_$v.txt)"
done
tar czf "$OUT/r.tgz" -C /tmp r
echo "done $(el)"
