#!/usr/bin/env bash
# Round 12's second call, typed in on the H100 r12a left warm (239 s of budget were left; from the project root):
# the FP8 1,000 prompts at the auto batch, beside r12a's max_num_seqs 512 on the same card.
export BUDGET_S=200; source benchmarks/results/nvidia-h200/final/env.sh; r=/tmp/r12b; mkdir -p $r
save() { tar czf "$OUT/r12b.tgz" -C /tmp r12b; echo "[$(el)] $*"; }
timeout 170 build/conveyor bench throughput --load-format dummy --set model.config=configs/models/llama-3-8b.yaml \
  --dtype bfloat16 --quantization fp8 --kv-cache-dtype fp8 --input-len 1024 --output-len 1024 --num-prompts 1000 \
  --output-json $r/throughput.fp8.seqs_auto.json > $r/t1000_fp8_seqs_auto.txt 2>&1
save "fp8 1000 prompts auto rc=$? $(grep -iE 'batch from|Throughput|TTFT|preempt' $r/t1000_fp8_seqs_auto.txt | tr '\n' ' ' | cut -c1-400)"
