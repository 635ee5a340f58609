#!/usr/bin/env bash
# Round 6 (results: ../a, on an H100), device call 1 (carry .gpu-deps; a fresh machine): build for sm_90a; the attention tests, which
# now hold both prefill kernels (mma.sync and the new wgmma one) to the CPU twin; attention_bench (the
# runtime's choice, and mma.sync again); doctor and the plans from it; the other GPU tests without MPI
# (the paged-cache address helper they share changed); batch 64 512/256 while time lasts.
# $OUT/r6a.tgz is rewritten after every step, so a call cut short still returns what it did.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
r=/tmp/r6a; mkdir -p $r
save() { tar czf "$OUT/r6a.tgz" -C /tmp r6a; echo "[$(el)] $*"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $r/gpu.txt
(cmake -S . -B build -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCONVEYOR_WERROR=OFF && ninja -C build -j16) > $r/build.log 2>&1 ||
  { grep -B2 -A10 -m5 "error" $r/build.log; save "build FAILED"; exit 1; }
save build
pass=0
for t in kernels_attention_gpu_test kernels_attention_fp8_gpu_test; do
  CONVEYOR_REQUIRE_GPU=1 timeout 200 ctest --test-dir build -R "^$t\$" --output-on-failure --timeout 190 > $r/ctest_$t.log 2>&1
  rc=$?; [ $rc = 0 ] && pass=$((pass + 1))
  save "$t rc=$rc $(grep -E 'Test +#' $r/ctest_$t.log)"
  grep -E "FAILED|Failure|differ|prefill kernel|Which is|Expected" $r/ctest_$t.log | head -12
done
timeout 120 build/benchmarks/attention_bench --json $r/attention.json > $r/attention.txt 2>&1
save "attention_bench rc=$?"; grep prefill $r/attention.txt | python3 -c "
import sys, json
for l in sys.stdin:
    try: d = json.loads(l)
    except Exception: continue
    print(f\"{d['name']:40s} {d['prefill_kernel']:9s} {d['TFLOP/s']:8.1f} TFLOP/s\")"
timeout 100 build/conveyor doctor --output-json $r/doctor.json > $r/doctor.log 2>&1
save "doctor rc=$?"; grep -iE "prefill|attention" $r/doctor.log | head -6
plan() {  # <name> <batch or 0> <in> <out>
  local b=(); [ "$2" != 0 ] && b=(--batch "$2")
  build/conveyor plan --compare --gpus 1 --set model.config=configs/models/llama-3-8b.yaml "${b[@]}" --input-len $3 \
    --output-len $4 --doctor-json $r/doctor.json --output-json $r/$1.predicted.json > $r/$1.predicted.txt 2>&1
}
plan batch64 64 512 256; plan latency_b1 1 128 128; plan throughput 0 1024 1024; save plans
grep -hiE "predicted|tok/s" $r/*.predicted.txt | head -6
if [ $pass = 2 ]; then
  m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
  timeout 120 build/conveyor bench throughput "${m[@]}" --input-len 512 --output-len 256 --num-prompts 64 --max-num-seqs 64 \
    --output-json $r/batch64.conveyor.json > $r/b64.txt 2>&1
  save "b64 rc=$? $(grep -iE 'Throughput|TTFT' $r/b64.txt | tr '\n' ' ')"
fi
[ "$(left)" -gt 100 ] && CONVEYOR_REQUIRE_GPU=1 timeout $(($(left) - 15)) ctest --test-dir build -L gpu -LE mpi \
  -E "kernels_attention_(fp8_)?gpu_test" -j3 --output-on-failure --timeout 200 > $r/ctest_gpu_nompi.log 2>&1
save "ctest -L gpu -LE mpi rc=$? $(grep -E 'tests passed|tests failed' $r/ctest_gpu_nompi.log)"
grep -E "Failed|\*\*\*" $r/ctest_gpu_nompi.log | head
