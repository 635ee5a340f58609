#!/usr/bin/env bash
# The next GPU round's first call (carry .gpu-deps; a fresh machine; written in session 7): the wgmma
# prefill kernel of the working tree, with 128-byte-swizzled tiles, four K/V stages and three schedules
# (CONVEYOR_WGMMA_SCHEDULE=overlap_qreg|overlap|sync). For each schedule: the attention tests (both prefill
# kernels against the CPU twin) and attention_bench; then, with the fastest kernel that passed
# (CONVEYOR_PREFILL_ATTENTION / CONVEYOR_WGMMA_SCHEDULE), doctor, batch 64 512/256 and the 1,000 prompts
# while time lasts. If a wgmma schedule wins and passes, make it the automatic choice.
set -uo pipefail
source benchmarks/results/nvidia-h200/final/env.sh
r=/tmp/wg; mkdir -p $r
save() { tar czf "$OUT/wg.tgz" -C /tmp wg; echo "[$(el)] $*"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $r/gpu.txt
(cmake -S . -B build -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCONVEYOR_WERROR=OFF && ninja -C build -j16) > $r/build.log 2>&1 ||
  { grep -B2 -A10 -m5 "error" $r/build.log; save "build FAILED"; exit 1; }
save build
tflops() { python3 -c "import json,sys; print(next(x['TFLOP/s'] for x in json.load(open(sys.argv[1])) if x['name']==sys.argv[2]))" "$1" "$2" 2>/dev/null || echo 0; }
for pp in overlap_qreg overlap sync; do
  pass=0
  for t in kernels_attention_gpu_test kernels_attention_fp8_gpu_test; do
    CONVEYOR_WGMMA_SCHEDULE=$pp CONVEYOR_REQUIRE_GPU=1 timeout 200 ctest --test-dir build -R "^$t\$" --output-on-failure \
      --timeout 190 > $r/pp${pp}_ctest_$t.log 2>&1
    rc=$?; [ $rc = 0 ] && pass=$((pass + 1))
    save "pingpong=$pp $t rc=$rc $(grep -E 'Test +#' $r/pp${pp}_ctest_$t.log)"
    grep -E "differ|prefill kernel|Failure" $r/pp${pp}_ctest_$t.log | head -6
  done
  echo $pass > $r/pp${pp}_pass
  CONVEYOR_WGMMA_SCHEDULE=$pp timeout 120 build/benchmarks/attention_bench --json $r/pp${pp}_attention.json > $r/pp${pp}_attention.txt 2>&1
  save "pingpong=$pp attention_bench rc=$? 8k: wgmma $(tflops $r/pp${pp}_attention.json prefill_8192_wgmma) mma.sync $(tflops $r/pp${pp}_attention.json prefill_8192_mma_sync)"
  grep prefill $r/pp${pp}_attention.txt | grep -oE '"name": "[^"]*"|"TFLOP/s": [0-9.]*' | paste - - | head -18
done
# The fastest at 8k among the kernels whose tests passed.
best=$(python3 - $r <<'PY'
import json, sys, os
r = sys.argv[1]
c = []
for pp in ("overlap_qreg", "overlap", "sync"):
    try:
        ok = open(f"{r}/pp{pp}_pass").read().strip() == "2"
        d = {x["name"]: x["TFLOP/s"] for x in json.load(open(f"{r}/pp{pp}_attention.json"))}
    except Exception:
        continue
    if ok:
        c.append((d.get("prefill_8192_wgmma", 0), f"wgmma {pp}"))
        c.append((d.get("prefill_8192_mma_sync", 0), "mma.sync sync"))
print(max(c)[1] if c else "mma.sync sync")
PY
)
set -- $best; export CONVEYOR_PREFILL_ATTENTION=$1 CONVEYOR_WGMMA_SCHEDULE=$2
echo "$best" > $r/CHOSEN; save "chosen: $best"
timeout 100 build/conveyor doctor --output-json $r/doctor.json > $r/doctor.log 2>&1
save "doctor rc=$?"; grep -iE "prefill|attention" $r/doctor.log | head -4
m=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
timeout 120 build/conveyor bench throughput "${m[@]}" --input-len 512 --output-len 256 --num-prompts 64 --max-num-seqs 64 \
  --output-json $r/batch64.conveyor.json > $r/b64.txt 2>&1
save "b64 rc=$? $(grep -iE 'Throughput|TTFT' $r/b64.txt | tr '\n' ' ')"
[ "$(left)" -gt 200 ] && timeout $(($(left) - 8)) build/conveyor bench throughput "${m[@]}" --input-len 1024 --output-len 1024 \
  --num-prompts 1000 --output-json $r/throughput.conveyor.json > $r/t1000.txt 2>&1
save "1000 prompts rc=$? $(grep -iE 'batch from memory|Throughput|TTFT' $r/t1000.txt | tr '\n' ' ' | cut -c1-300)"
