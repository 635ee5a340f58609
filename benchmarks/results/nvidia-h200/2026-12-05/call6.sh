#!/usr/bin/env bash
# Round 2, device call 6 (carry .smolC .whl; calls 4 and 5 left the build, /tmp/smolA and /tmp/smolB): the
# GPU tests round 1 did not finish or failed, each alone (stages_cuda_fp8_gpu_test and
# stages_cuda_smollm2_gpu_test ran past ctest's limit beside the np 4 pipeline test on the shared GPU;
# cli_batch_signal_gpu_mpi after the stop-signal fix; kernels_gemm_gpu_test for the bucketed GEMM timing),
# then batch 64 512/256 (issue 14's workload, after the bucketed timing), the batch-64 step timeline, batch
# 1 with FP8 weights (the small-m FP8 gemv) with bf16 and FP8 KV, SmolLM2 perplexity with FP8 weights, FP8
# KV and calculated scales, and last the 1,000-prompt run while device time lasts. $OUT/r.tgz is
# rewritten after every step, so a call cut short still returns what it did.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
r=/tmp/r; mkdir -p $r
source benchmarks/results/nvidia-h200/final/gguf_from_pieces.sh > $r/gguf.sha256; cat $r/gguf.sha256
save() { tar czf "$OUT/r.tgz" -C /tmp r; echo "[$(el)] $*"; }
for t in stages_cuda_fp8_gpu_test stages_cuda_smollm2_gpu_test cli_batch_signal_gpu_mpi kernels_gemm_gpu_test; do
  CONVEYOR_REQUIRE_GPU=1 timeout 150 ctest --test-dir build -R "^$t\$" --output-on-failure --timeout 140 > $r/ctest_$t.log 2>&1
  save "$t rc=$? $(grep -E 'Test +#' $r/ctest_$t.log)"
done
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
timeout 90 build/conveyor bench throughput "${m[@]}" --input-len 512 --output-len 256 --num-prompts 64 --max-num-seqs 64 \
  --output-json $r/b64_tput.json > $r/b64_tput.txt 2>&1
save "b64 throughput rc=$? $(grep -iE 'Throughput' $r/b64_tput.txt | head -1)"
timeout 90 build/conveyor bench latency "${m[@]}" --input-len 512 --output-len 256 --batch-size 64 --num-iters-warmup 1 \
  --num-iters 3 --step-timeline $r/steps_b64.json --output-json $r/b64_latency.json > $r/b64_latency.txt 2>&1
save "b64 step timeline rc=$?"; grep -A16 -i "step timeline" $r/b64_latency.txt | head -24
for v in fp8w fp8; do  # FP8 weights with bf16 KV (239.1 tok/s on 2026-12-04, cuBLASLt at m = 1), then FP8 KV too
  q=(--quantization fp8); [ $v = fp8 ] && q+=(--kv-cache-dtype fp8)
  timeout 90 build/conveyor bench latency "${m[@]}" --input-len 128 --output-len 128 --batch-size 1 --num-iters-warmup 3 \
    --num-iters 10 "${q[@]}" --output-json $r/b1_$v.json > $r/b1_$v.txt 2>&1
  save "b1 $v rc=$? $(grep -iE 'tok/s|Avg latency' $r/b1_$v.txt | head -2 | tr '\n' ' ')"
done
timeout 90 build/conveyor perplexity --model "$g" --file tests/data/perplexity/text.txt --ctx-size 512 --set runtime.backend=cuda \
  --quantization fp8 --kv-cache-dtype fp8 --calculate-kv-scales --output-json $r/ppl_fp8calc.json > $r/ppl_fp8calc.txt 2>&1
save "ppl fp8calc rc=$? $(grep -E 'Final|KV scales' $r/ppl_fp8calc.txt | tr '\n' ' ')"
[ "$(left)" -gt 60 ] && timeout $(($(left) - 8)) build/conveyor bench throughput "${m[@]}" --input-len 1024 --output-len 1024 \
  --num-prompts 1000 --output-json $r/t1000.json > $r/t1000.txt 2>&1
save "1000 prompts rc=$? $(grep -iE 'batch from memory|Throughput|TTFT' $r/t1000.txt | tr '\n' ' ')"
