#!/usr/bin/env bash
# Device call D of the next verification round, after final/callA.sh, the copy of .smolB and final/callC.sh
# (the build, the SmolLM2 GGUF in $CONVEYOR_CACHE and the GPU suite are there): what this session built
# without a GPU. (1) The step timeline of a batch-64 decode step (issue 16 item 2: every microsecond of it,
# for docs/bench.md). (2) The 1,000-prompt run with the batch chosen from memory (issue 16 item 4; with
# CUDA graphs it stays at 256 per micro-batch) and the same with --max-num-seqs 512 --enforce-eager (does a
# bigger batch without graphs win?). (3) SmolLM2 perplexity with FP8 weights + FP8 KV and
# --calculate-kv-scales (issue 15's 3%; without it the H200 measured +3.38%).
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
mkdir -p /tmp/d
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
timeout $(($(left) - 5)) build/conveyor bench latency "${m[@]}" --input-len 512 --output-len 256 --batch-size 64 \
  --num-iters-warmup 1 --num-iters 3 --step-timeline /tmp/d/steps_b64.json --output-json /tmp/d/b64_latency.json \
  > /tmp/d/b64_latency.txt 2>&1
echo "b64 step timeline rc=$? $(el)"; grep -A12 "step timeline" /tmp/d/b64_latency.txt
t=(--input-len 1024 --output-len 1024 --num-prompts 1000)
timeout $(($(left) - 5)) build/conveyor bench throughput "${m[@]}" "${t[@]}" --output-json /tmp/d/t1000_auto.json \
  > /tmp/d/t1000_auto.txt 2>&1
echo "1000 auto rc=$? $(el)"; grep -E "batch from memory|Throughput|TTFT" /tmp/d/t1000_auto.txt
[ "$(left)" -gt 200 ] && timeout $(($(left) - 5)) build/conveyor bench throughput "${m[@]}" "${t[@]}" --max-num-seqs 512 \
  --enforce-eager --output-json /tmp/d/t1000_512_eager.json > /tmp/d/t1000_512_eager.txt 2>&1
echo "1000 512 eager rc=$? $(el)"; grep -E "Throughput|TTFT" /tmp/d/t1000_512_eager.txt
g=$CONVEYOR_CACHE/SmolLM2-135M-Instruct.Q4_1.gguf
[ "$(left)" -gt 60 ] && timeout $(($(left) - 5)) build/conveyor perplexity --model "$g" --file tests/data/perplexity/text.txt \
  --ctx-size 512 --set runtime.backend=cuda --quantization fp8 --kv-cache-dtype fp8 --calculate-kv-scales \
  --output-json /tmp/d/ppl_fp8_calc.json > /tmp/d/ppl_fp8_calc.txt 2>&1
echo "ppl fp8 calc rc=$? $(el)"; grep -E "Final|KV scales" /tmp/d/ppl_fp8_calc.txt
tar czf "$OUT/callD.tgz" -C /tmp d
echo "done $(el)"
