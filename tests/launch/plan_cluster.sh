#!/usr/bin/env bash
# `conveyor plan --cluster`: ranked layouts with reasons, the srun line of the best, the JSON for scripts,
# exit status 3 when nothing fits, and errors naming the flag or key.
set -u
bin=$1
root="$(cd "$(dirname "$0")/../.." && pwd)"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
expect() {
  local want_rc=$1 want=$2; shift 2
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [[ "$out" != *"$want"* || $rc != "$want_rc" ]]; then
    echo "FAIL: '$*' exited $rc (wanted $want_rc); wanted '$want' in:"; echo "$out"; fail=1
  fi
}
plan=("$bin" plan --cluster "$root/configs/clusters/h200-8x8-ib.yaml" --set "model.config=$root/configs/models/llama-3.1-70b.yaml")
expect 0 "run the best with:" "${plan[@]}" --workload prompts=64,input=128,output=16 --output-json "$tmp/p.json"
expect 0 "srun --mpi=pmix -N 8 --ntasks-per-node=8" "${plan[@]}" --workload prompts=64,input=128,output=16
expect 0 "do not fit" "${plan[@]}" --workload prompts=64,input=128,output=16
python3 - "$tmp/p.json" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["layouts"]
fit = [r for r in rows if r["fits"]]
assert d["cluster"]["nodes"] == 8 and d["workload"]["prompts"] == 64, d["workload"]
assert all(r["data"] * r["pipeline"] * r["tensor"] == 64 for r in rows)
assert fit and all(a["output_tokens_per_s"] >= b["output_tokens_per_s"] for a, b in zip(fit, fit[1:]))
assert all(r["reason"] and r["slurm"].startswith("srun") and len(r["stages"]) == r["pipeline"] for r in fit)
assert not rows[-1]["fits"] and rows[-1]["why_not"], rows[-1]
PY
expect 3 "does not fit" "$bin" plan --cluster "$root/configs/clusters/h200-1.yaml" \
  --set "model.config=$root/configs/models/llama-3.1-405b.yaml" --workload prompts=1,input=8,output=2
expect 1 "unknown key 'prompt'" "${plan[@]}" --workload prompt=4
expect 1 "--gpus does not apply to --cluster" "${plan[@]}" --gpus 8
expect 1 "--workload applies to --cluster only" "$bin" plan --set "model.config=$root/configs/models/llama-3-8b.yaml" --workload prompts=1
expect 1 "cannot read the cluster file" "$bin" plan --cluster "$tmp/none.yaml" --set "model.config=$root/configs/models/llama-3-8b.yaml"
exit $fail
