#!/usr/bin/env bash
# Round 6 (results: ../b, on an H100), device call 2 (no carry; after call 1 on the same machine, whose build and doctor.json it uses):
# benchmarks/suite_h200.sh step by step with the HF peers in the same run (issue 16's acceptance run):
# batch 1 128/128, batch 64 512/256, the peers (HF default and static cache, batch 1 and 64), then the
# 1,000 prompts 1024/1024 and the table. $OUT/r6b.tgz is rewritten after every step.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
r=/tmp/r6b; mkdir -p $r/suite
save() { tar czf "$OUT/r6b.tgz" -C /tmp r6b; echo "[$(el)] $*"; }
cp /tmp/r6a/doctor.json /tmp/r6a/doctor.log $r/suite/
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $r/gpu.txt
for st in latency b64 peers throughput table; do
  [ "$st" = throughput ] && [ "$(left)" -lt 260 ] && { save "no time left for the 1,000 prompts ($(left) s)"; continue; }
  SUITE_OUT=$r/suite NUM_PROMPTS=1000 timeout $(($(left) - 10)) bash benchmarks/suite_h200.sh $st > $r/suite_$st.log 2>&1
  save "$st rc=$? $(grep -hiE 'Throughput:|tok/s' $r/suite_$st.log | head -3 | tr '\n' ' ' | cut -c1-300)"
done
cat $r/suite/table.md 2>/dev/null | head -30
