#!/usr/bin/env bash
# `mpirun conveyor doctor` on CPU: rank table, the CPU device section (kernels, core sharing, hop), every
# pipeline edge and TP group measured, JSON written; a layout that does not match the job fails on every
# rank with the four numbers, and nothing hangs.
set -u
bin=$1
tmp=$(mktemp -d)
fail=0
mpi="mpirun --oversubscribe -x OMPI_MCA_btl_vader_single_copy_mechanism=none"
out=$(timeout 120 $mpi -np 4 "$bin" doctor -tp 2 --bytes 4M --iters 3 --output-json "$tmp/d.json" 2>&1)
rc=$?
echo "$out"
[ $rc = 0 ] || { echo "FAIL: doctor exit $rc"; fail=1; }
for want in "layout data 1 x pipeline 2 x tensor 2" "0 -> 2" "1 -> 3" "tensor-parallel groups" "0,1" "2,3"; do
  [[ "$out" == *"$want"* ]] || { echo "FAIL: missing '$want'"; fail=1; }
done
python3 - "$tmp/d.json" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
assert d["world_size"] == 4, d
assert len(d["edges"]) == 2 and all(e["bandwidth_gbps"] > 0 and e["latency_us"] > 0 for e in d["edges"]), d
assert len(d["tensor_groups"]) == 2 and all(g["busbw_gbps"] > 0 for g in d["tensor_groups"]), d
assert all(g["latency_us"] > 0 for g in d["tensor_groups"]), d["tensor_groups"]
# The CPU backend's device section (stages/cpu_probe.h): its fp32 kernels and how the 4 ranks share cores.
dev = d["device"]
assert dev["backend"] == "cpu" and dev["dtype"] == "fp32" and dev["padded_rows"] is False, dev
assert [b["m"] for b in dev["gemm_decode"]["buckets"]] == [1, 4, 16, 64, 256], dev["gemm_decode"]
assert all(b["bandwidth_gbps"] > 0 for b in dev["gemm_decode"]["buckets"]), dev["gemm_decode"]
assert dev["tflops"] > 0 and dev["bandwidth_gbps"] > 0 and dev["step_overhead"]["us"] >= 0, dev
sh = dev["sharing"]
assert sh["ranks"] == 4 and len(sh["speed"]) == 4 and sh["speed"][0] == 1.0, sh
assert sh["hop_us"] > 0 and sh["busy_hop_us"] > 0, sh
# The stayer probe (stages/cpu_placement_probe.h), where the 4 ranks outnumber the CPUs: how well a CPU's
# run queue keeps its ranks, with 3 and 4 ranks on 2 CPUs.
if sh["cpus"] < 4:
    st = sh["stayer"]["by_ranks"]
    assert [b["ranks"] for b in st] == list(range(sh["cpus"] + 1, 5)), st
    assert all(b["crowded_ms"] > 0 and 0 <= b["stayer_share"] <= 1 for b in st), st
    assert all(0 <= e["value"] <= 1 for e in sh["stickiness"]), sh["stickiness"]
    # The ring probe (stages/cpu_ring_probe.h): speed by k as a pipeline of 3 and 4 ranks meets it.
    ps = sh["pipeline_speed"]
    assert [b["ranks"] for b in ps] == list(range(sh["cpus"] + 1, 5)), ps
    assert all(len(b["speed"]) == b["ranks"] and all(0 <= v <= 1.5 for v in b["speed"]) for b in ps), ps
    # calls[k - 1]: how many calls met k ranks (a reading counts only from enough of them).
    assert all(len(b["calls"]) == b["ranks"] and sum(b["calls"]) > 0 for b in ps), ps
PY
out=$(timeout 60 $mpi -np 3 "$bin" doctor -pp 2 --bytes 1M 2>&1)
rc=$?
[ $rc != 0 ] || { echo "FAIL: mismatched layout exited 0"; fail=1; }
[ $rc != 124 ] || { echo "FAIL: mismatched layout hung"; fail=1; }
[[ "$out" == *"data (1) x pipeline (2) x tensor (1) = 2 ranks, but the job has 3 ranks"* ]] || {
  echo "FAIL: mismatch message"; echo "$out"; fail=1; }
rm -rf "$tmp"
exit $fail
