#!/usr/bin/env bash
# The 1 x H200 suite (issue 8): Llama-3-8B shape, bf16, dummy weights; conveyor against the HF peer and
# the roofline, each run next to its `plan --compare` prediction made from this GPU's `conveyor doctor`
# measurements (doctor.json); results and table.md in benchmarks/results/nvidia-h200/.
# One command: benchmarks/suite_h200.sh [step ...]
#   steps: doctor latency throughput b64 peers table (default: all, in that order)
# Env: CONVEYOR (binary, default build/conveyor), SUITE_OUT (results folder, default
# benchmarks/results/nvidia-h200), PYTHON (python3), NUM_PROMPTS (1000; lower it to fit a
# time limit and say so), HF_ITERS (1), SUITE_TINY=1 (a CPU smoke run of the same steps on the 5-layer
# golden, results in $OUT or /tmp/conveyor-suite-tiny).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${CONVEYOR:-build/conveyor}
py=${PYTHON:-python3}
prompts=${NUM_PROMPTS:-1000}
if [[ ${SUITE_TINY:-0} == 1 ]]; then
  out=${OUT:-/tmp/conveyor-suite-tiny}/nvidia-h200
  model=(--model tests/data/goldens/llama_deep)
  shape=tests/data/goldens/llama_deep/config.json
  peer_dev=(--device cpu --dtype float32)
  lat=(16 8) thr=(24 16) b64=(16 8) prompts=${NUM_PROMPTS:-12}
else
  out=${SUITE_OUT:-benchmarks/results/nvidia-h200}
  model=(--load-format dummy --set model.config=configs/models/llama-3-8b.yaml --dtype bfloat16)
  shape=configs/models/llama-3-8b.yaml
  peer_dev=(--device cuda --dtype bfloat16)
  lat=(128 128) thr=(1024 1024) b64=(512 256)
fi
mkdir -p "$out"
steps=("$@")
[[ ${#steps[@]} -gt 0 ]] || steps=(doctor latency throughput b64 peers table)

predict() {  # <run> <batch, 0: from memory as the run chooses it> <in> <out>: from the doctor's measured speeds when the doctor step ran
  local measured=() batch=()
  [[ -f "$out/doctor.json" ]] && measured=(--doctor-json "$out/doctor.json")
  [[ "$2" != 0 ]] && batch=(--batch "$2")
  "$bin" plan --compare --gpus 1 --set model.config="$shape" "${batch[@]}" --input-len "$3" --output-len "$4" \
    "${measured[@]}" --output-json "$out/$1.predicted.json" | tee "$out/$1.predicted.txt"
}
peer() {  # <run> <batch> <in> <out>
  for cache in default static; do
    "$py" benchmarks/peers/hf_generate.py --config "$shape" "${peer_dev[@]}" --batch "$2" --input-len "$3" \
      --output-len "$4" --cache "$cache" --iters "${HF_ITERS:-1}" --output-json "$out/$1.hf_$cache.json" || true
  done
}

for step in "${steps[@]}"; do
  echo "=== $step"
  case $step in
    doctor)  # the GPU's GEMM, attention and graph-launch speeds (the planner's inputs), ~10 s
      "$bin" doctor --output-json "$out/doctor.json" | tee "$out/doctor.log" ;;
    latency)  # batch 1: the bandwidth roofline (issue: >= 80% of 286 tok/s)
      predict latency_b1 1 "${lat[0]}" "${lat[1]}"
      "$bin" bench latency "${model[@]}" --input-len "${lat[0]}" --output-len "${lat[1]}" --batch-size 1 \
        --num-iters-warmup 3 --num-iters 10 --output-json "$out/latency_b1.conveyor.json" ;;
    throughput)  # many prompts at the default max_num_seqs: what the KV room holds of in + out tokens (<= 1024)
      predict throughput $((prompts < 256 ? prompts : 0)) "${thr[0]}" "${thr[1]}"
      "$bin" bench throughput "${model[@]}" --input-len "${thr[0]}" --output-len "${thr[1]}" \
        --num-prompts "$prompts" --output-json "$out/throughput.conveyor.json" ;;
    b64)  # the peer's measured workload: batch 64, 512 in / 256 out
      predict batch64 64 "${b64[0]}" "${b64[1]}"
      "$bin" bench throughput "${model[@]}" --input-len "${b64[0]}" --output-len "${b64[1]}" --num-prompts 64 \
        --max-num-seqs 64 --output-json "$out/batch64.conveyor.json" ;;
    peers)
      peer latency_b1 1 "${lat[0]}" "${lat[1]}"
      peer batch64 64 "${b64[0]}" "${b64[1]}" ;;
    table) "$py" benchmarks/make_table.py "$out" -o "$out/table.md" --png "$out/results.png" ;;
    *) echo "unknown step '$step' (doctor latency throughput b64 peers table)"; exit 2 ;;
  esac
done
