#!/usr/bin/env bash
# Round 10's second call, on the machine call_r10a.sh left warm (its build and doctor.json; carry .gpu-deps anyway
# in case a fresh machine comes): issue 16's acceptance run, benchmarks/suite_h200.sh step by step with the HF
# peers in the same run (batch 1 128/128, batch 64 512/256, the peers, then the 1,000 prompts 1024/1024 and the
# table), each beside plan --compare from this GPU's doctor; also issue 18 4(a)'s rows. $OUT/r10b.tgz after
# every step.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
r=/tmp/r10b; mkdir -p $r/suite
save() { tar czf "$OUT/r10b.tgz" -C /tmp r10b; echo "[$(el)] $*"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $r/gpu.txt
for d0 in /tmp/r10c /tmp/r10a; do [ -f $d0/doctor.json ] && break; done
if [ -f $d0/doctor.json ] && [ -x build/conveyor ]; then
  cp $d0/doctor.json $d0/doctor.log $r/suite/
  steps=(latency b64 peers throughput table)
else  # a fresh machine: build, and the suite's own doctor step
  (cmake -S . -B build -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCONVEYOR_WERROR=OFF && ninja -C build -j16 conveyor) \
    > $r/build.log 2>&1 || { save "build FAILED"; exit 1; }
  steps=(doctor latency b64 peers throughput table)
fi
for st in "${steps[@]}"; do
  [ "$st" = throughput ] && [ "$(left)" -lt 200 ] && { save "no time left for the 1,000 prompts ($(left) s)"; continue; }
  SUITE_OUT=$r/suite NUM_PROMPTS=1000 timeout $(($(left) - 10)) bash benchmarks/suite_h200.sh $st > $r/suite_$st.log 2>&1
  save "$st rc=$? $(grep -hiE 'Throughput:|tok/s' $r/suite_$st.log | head -3 | tr '\n' ' ' | cut -c1-300)"
done
cat $r/suite/table.md 2>/dev/null | head -30
