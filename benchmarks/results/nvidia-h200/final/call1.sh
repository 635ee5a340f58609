#!/usr/bin/env bash
# Device call 1 (nvidia-h200, carry .gpu-deps .smolA): build; the GPU tests (mpi ones included; not the
# two that read the SmolLM2 GGUF, which arrives in pieces by call 3); the model-identity hash cost on
# the Llama-3-8B checkpoint layout (issue 20); bench batch 1 and batch 64 (issue 14). Logs to $OUT.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
(python3 scripts/make_dummy_checkpoint.py /tmp/l3-8b > "$OUT/ckpt.log" 2>&1; echo "ckpt rc=$? $(el)" >> "$OUT/ckpt.log") &
cmake -S . -B build -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 -DCONVEYOR_WERROR=OFF > "$OUT/build.log" 2>&1 &&
  ninja -C build -j16 >> "$OUT/build.log" 2>&1 || { grep -B2 -A10 -m5 "error" "$OUT/build.log"; exit 1; }
echo "build $(el)"; nvidia-smi -L
CONVEYOR_REQUIRE_GPU=1 timeout $(($(left) - 170)) ctest --test-dir build -L gpu -E "smollm2|cli_batch_signal_gpu" \
  --output-on-failure --timeout 200 -j3 > "$OUT/ctest_gpu.log" 2>&1
echo "ctest gpu rc=$? $(el)"
grep -E "tests passed|\*\*\*|Failed|Not Run|Passed" "$OUT/ctest_gpu.log" | tail -30
wait; tail -2 "$OUT/ckpt.log"
timeout $(($(left) - 100)) build/benchmarks/load_bench --model /tmp/l3-8b --repeat 3 --json "$OUT/load_8b.json"
echo "load_bench rc=$? $(el)"
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
for i in 1 2; do
  [ "$(left)" -gt 40 ] && timeout $(($(left) - 5)) build/conveyor bench throughput "${m[@]}" --input-len 512 --output-len 256 \
    --num-prompts 64 --max-num-seqs 64 --output-json "$OUT/b64_$i.json" > "$OUT/b64_$i.txt" 2>&1
  echo "b64 $i rc=$? $(el) $(grep -o '"output_tokens_per_second": [0-9.]*' "$OUT/b64_$i.json" 2>/dev/null)"
  [ "$(left)" -gt 30 ] && timeout $(($(left) - 5)) build/conveyor bench latency "${m[@]}" --input-len 128 --output-len 128 \
    --batch-size 1 --num-iters-warmup 3 --num-iters 10 --output-json "$OUT/b1_$i.json" > "$OUT/b1_$i.txt" 2>&1
  echo "b1 $i rc=$? $(el) $(grep -o '"output_tokens_per_second": [0-9.]*' "$OUT/b1_$i.json" 2>/dev/null)"
done
echo "done $(el)"
