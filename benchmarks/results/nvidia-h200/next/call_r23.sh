#!/usr/bin/env bash
# Round 23's first call (any GPU; carry .gpu-deps; ~400 s). The batch-256 FP8 decode step's largest kernel is the
# tensor-core decode attention: 6,716 us of round 22's 12,937 us step (H100), 2.66 TB/s of 3.35, and the 4-CTA
# variant that filled its last wave made no difference (rounds 21, 22). Before changing it, what bounds it:
# (1) ncu --set full over two decode_mma_kernel launches of a batch-256 FP8 decode step (1024 in, step 40): DRAM
# throughput, issue slots, eligible warps, and where the warps stall (benchmarks/ncu_stalls.py over the SASS page).
# A kernel issue-bound at ~2.7 TB/s wants fewer instructions a byte (the mma's 16 rows carry 4 heads at Llama-3's
# GQA group of 4: an S^T = K Q^T layout would carry 8 of 8); a memory-latency-bound one wants more bytes in flight.
# (2) On an H200 only: issue 15's 1,000 prompts FP8 under round 22's defaults. (3) Any GPU: the same run with
# --step-timeline (every step's host and device spans: how the run's time splits between decode steps, mixed
# prefill steps, sampling and device idle; the simulator puts ~8% of it nowhere). Then call_r19b.sh.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
call_begin r23 conveyor || exit 1
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16 --quantization fp8
  --kv-cache-dtype fp8)
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
timeout 240 $ncu --profile-from-start off --set full -k regex:decode_mma_kernel --launch-count 2 -o $r/attn_full \
  build/conveyor bench latency "${m[@]}" --input-len 1024 --output-len 48 --batch-size 256 --num-iters 1 \
  --num-iters-warmup 0 --set runtime.profile_step=40 > $r/ncu_attn.txt 2>&1
save "ncu attention rc=$?"
$ncu -i $r/attn_full.ncu-rep --page details --csv > $r/attn_details.csv 2>/dev/null
$ncu -i $r/attn_full.ncu-rep --page source --print-source sass --csv 2>/dev/null | gzip > $r/attn_sass.csv.gz
python3 - $r/attn_details.csv <<'PY' | tee $r/attn_summary.txt
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
h = rows[0]; ix = {k: i for i, k in enumerate(h)}
want = ('Duration', 'DRAM Throughput', 'Memory Throughput', 'Achieved Occupancy', 'Theoretical Occupancy',
        'Registers Per Thread', 'Block Size', 'Grid Size', 'Waves Per SM', 'Warp Cycles Per Issued Instruction',
        'L2 Hit Rate', 'L1/TEX Hit Rate', 'Issue Slots Busy', 'Issued Warp Per Scheduler', 'Eligible Warps Per Scheduler',
        'No Eligible', 'Executed Ipc Active', 'Compute (SM) Throughput')
for r in rows[1:]:
    if r[ix['Metric Name']] in want:
        print(r[ix['ID']], r[ix['Metric Name']], r[ix['Metric Value']], r[ix['Metric Unit']])
PY
python3 benchmarks/ncu_stalls.py $r/attn_sass.csv.gz 30 > $r/attn_stalls.txt 2>&1
head -14 $r/attn_stalls.txt
save "summary"
grep -q H200 "$r/gpu.txt" && throughput_seqs fp8 auto -- "${m[@]}"
throughput_seqs fp8_timeline auto -- "${m[@]}" --step-timeline $r/steps_fp8.json
python3 benchmarks/timeline_split.py $r/steps_fp8.json --json $r/timeline_split_fp8.json > $r/timeline_split_fp8.txt 2>&1
cat $r/timeline_split_fp8.txt | head -20
gzip -f $r/steps_fp8.json 2>/dev/null
save "timeline $(grep -A14 -i 'anatomy\|per step' $r/t1000_fp8_timeline_seqs_auto.txt | tr -s ' ' | tr '\n' ' ' | cut -c1-900)"
