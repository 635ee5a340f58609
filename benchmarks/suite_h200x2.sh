#!/usr/bin/env bash
# The 2 x H200 suite (issue 8): Llama-3-70B shape, bf16, dummy weights, pp=2 and tp=2 in the same run
# (memory-bound 1024/1024 and a large-batch 128/1024), each next to its `plan --compare` prediction made
# from this machine's `conveyor doctor` links and measured kernel speeds; the pp=2 trace rendered to a PNG; the HF peer with its
# layers split over both GPUs; table.md. Results in benchmarks/results/nvidia-h200-x2/.
# One command: benchmarks/suite_h200x2.sh [step ...]
#   steps: doctor pp2 tp2 big_pp2 big_tp2 peers plot table (default: all, in that order)
# Env: CONVEYOR (default build/conveyor), PYTHON, MPIRUN (default "mpirun -np 2"), NUM_PROMPTS (512),
# BIG_PROMPTS (512), HF_BATCH (16), SUITE_TINY=1 (CPU smoke run on the 5-layer golden into $OUT).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${CONVEYOR:-build/conveyor}
py=${PYTHON:-python3}
mpi=${MPIRUN:-mpirun -np 2}
if [[ ${SUITE_TINY:-0} == 1 ]]; then
  out=${OUT:-/tmp/conveyor-suite-tiny}/nvidia-h200-x2
  model=(--model tests/data/goldens/llama_deep)
  shape=tests/data/goldens/llama_deep/config.json
  peer_dev=(--device cpu --dtype float32)
  mem=(24 16) big=(8 16) prompts=${NUM_PROMPTS:-12} big_prompts=${BIG_PROMPTS:-16} seqs=8 big_seqs=16
else
  out=benchmarks/results/nvidia-h200-x2
  model=(--load-format dummy --set model.config=configs/models/llama-3-70b.yaml --dtype bfloat16)
  shape=configs/models/llama-3-70b.yaml
  peer_dev=(--device cuda --dtype bfloat16)
  mem=(1024 1024) big=(128 1024) prompts=${NUM_PROMPTS:-512} big_prompts=${BIG_PROMPTS:-512} seqs=256 big_seqs=512
fi
mkdir -p "$out"
steps=("$@")
[[ ${#steps[@]} -gt 0 ]] || steps=(doctor pp2 tp2 big_pp2 big_tp2 peers plot table)

predict() {  # <run> <batch> <in> <out>: both layouts ranked; make_table picks the run's row
  local links=()
  [[ -f "$out/doctor.json" ]] && links=(--doctor-json "$out/doctor.json")
  "$bin" plan --compare --gpus 2 --set model.config="$shape" --batch "$2" --input-len "$3" --output-len "$4" \
    "${links[@]}" --output-json "$out/$1.predicted.json" | tee "$out/$1.predicted.txt"
}
bench() {  # <run> <layout flag> <in> <out> <prompts> <max seqs> [more flags]
  local run=$1 layout=$2 i=$3 o=$4 n=$5 s=$6
  shift 6
  predict "$run" "$s" "$i" "$o"
  $mpi "$bin" bench throughput "${model[@]}" "$layout" 2 --input-len "$i" --output-len "$o" --num-prompts "$n" \
    --max-num-seqs "$s" --output-json "$out/$run.conveyor.json" "$@"
}

for step in "${steps[@]}"; do
  echo "=== $step"
  case $step in
    doctor)  # p2p of the pipeline edge, all-reduce of the TP pair and (first run, rank 0's GPU) the kernel
      # speeds, merged for plan --compare
      $mpi "$bin" doctor -pp 2 --output-json "$out/doctor_pp2.json" | tee "$out/doctor_pp2.log"
      $mpi "$bin" doctor -tp 2 --skip-device --output-json "$out/doctor_tp2.json" | tee "$out/doctor_tp2.log"
      "$py" - "$out" <<'PY'
import json, sys
d = sys.argv[1]
pp, tp = (json.load(open(f"{d}/doctor_{k}.json")) for k in ("pp2", "tp2"))
merged = {"edges": pp["edges"], "tensor_groups": tp["tensor_groups"]}
if "device" in pp:  # absent on the CPU backend: plan --compare then says "ideal roofline"
    merged["device"] = pp["device"]
json.dump(merged, open(f"{d}/doctor.json", "w"), indent=2)
PY
      ;;
    pp2) bench pp2 -pp "${mem[0]}" "${mem[1]}" "$prompts" "$seqs" --trace "$out/pp2_trace.json" ;;
    tp2) bench tp2 -tp "${mem[0]}" "${mem[1]}" "$prompts" "$seqs" ;;
    big_pp2) bench big_pp2 -pp "${big[0]}" "${big[1]}" "$big_prompts" "$big_seqs" ;;
    big_tp2) bench big_tp2 -tp "${big[0]}" "${big[1]}" "$big_prompts" "$big_seqs" ;;
    peers)  # HF with layers split over both GPUs, at a batch that fits its cache (HF_BATCH); one
      # measurement serves both rows of the 1024/1024 workload
      for cache in default static; do
        "$py" benchmarks/peers/hf_generate.py --config "$shape" "${peer_dev[@]}" --devices 2 \
          --batch "${HF_BATCH:-16}" --input-len "${mem[0]}" --output-len "${mem[1]}" --cache "$cache" \
          --output-json "$out/pp2.hf_$cache.json" || true
        cp "$out/pp2.hf_$cache.json" "$out/tp2.hf_$cache.json"
      done ;;
    plot)
      "$py" benchmarks/plot_trace.py "$out/pp2_trace.json" -o "$out/pp2_timeline.png" \
        --title "Llama-3-70B pp=2 on 2 x H200 (whole run)"
      "$py" benchmarks/plot_trace.py "$out/pp2_trace.json" -o "$out/pp2_timeline_steady.png" --middle-ms 100 \
        --title "Llama-3-70B pp=2 on 2 x H200 (100 ms of steady-state decode)" ;;
    table) "$py" benchmarks/make_table.py "$out" -o "$out/table.md" --png "$out/results.png" ;;
    *) echo "unknown step '$step' (doctor pp2 tp2 big_pp2 big_tp2 peers plot table)"; exit 2 ;;
  esac
done
