#!/usr/bin/env bash
# Round 11's second call, typed in by hand on the H100 call_r11v.sh left warm (205 s of budget were left; run
# from the project root): batch 1 bf16 with PDL signalled after the wait and without, then the FP8 1,000 prompts
# with the fused input quantizers.
export BUDGET_S=205; source benchmarks/results/nvidia-h200/final/env.sh; r=/tmp/r11w; mkdir -p $r
save() { tar czf "$OUT/r11w.tgz" -C /tmp r11w; echo "[$(el)] $*"; }
mb=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
for p in 1 0; do
  CONVEYOR_PDL=$p timeout 60 build/conveyor bench latency "${mb[@]}" --input-len 128 --output-len 128 --batch-size 1 \
    --num-iters-warmup 3 --num-iters 10 --output-json $r/latency_b1.bf16.pdl$p.json > $r/b1_bf16_pdl$p.txt 2>&1
  save "b1 bf16 PDL=$p rc=$? $(grep -iE 'Avg latency' $r/b1_bf16_pdl$p.txt)"
done
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16 --quantization fp8
  --kv-cache-dtype fp8 --input-len 1024 --output-len 1024 --num-prompts 1000)
CONVEYOR_FUSED_FP8_INPUT=1 timeout $(($(left) - 5)) build/conveyor bench throughput "${m[@]}" \
  --output-json $r/throughput.fp8.fused1.json > $r/t1000_fp8_fused1.txt 2>&1
save "fp8 1000 fused=1 rc=$? $(grep -iE 'Throughput|TTFT' $r/t1000_fp8_fused1.txt | tr '\n' ' ' | cut -c1-300)"
