#!/usr/bin/env bash
# `conveyor bench` smoke test on the 5-layer golden: throughput under mpirun with -pp 2 (random lengths),
# latency on one rank, a KV pool small enough to force preemptions, and `plan --compare` on Llama-3-70B.
# Every JSON is parsed and its fields checked for presence and consistency (token sums, rates = tokens
# / elapsed, busy + send + bubble = 100 per stage, lengths inside the random range).
source "$(dirname "${BASH_SOURCE[0]}")/golden.bash"

# --- throughput, pp=2 over 2 ranks --------------------------------------------------------------------
out=$(timeout 300 $mpi -np 2 "$bin" bench throughput --model "$model" --input-len 16 --output-len 8 \
  --num-prompts 12 --random-range-ratio 0.5 -pp 2 --max-num-seqs 4 --seed 3 --output-json "$tmp/t.json" \
  --trace "$tmp/trace.json" 2>"$tmp/t.err")
rc=$?
echo "$out"
[ $rc = 0 ] || { echo "FAIL: bench throughput exit $rc"; cat "$tmp/t.err"; fail=1; }
# The result block on stdout in vLLM's order: Throughput, prompt and output totals, then ours; the
# roofline is against this host's measured CPU, not GPU peaks.
[[ "$(sed -n 1p <<<"$out")" =~ ^Throughput:\ [0-9.]+\ requests/s,\ [0-9.]+\ total\ tokens/s,\ [0-9.]+\ output\ tokens/s$ ]] || {
  echo "FAIL: summary line '$out'"; fail=1; }
[[ "$(sed -n 2p <<<"$out")" =~ ^Total\ num\ prompt\ tokens:\ +[0-9]+$ && "$(sed -n 3p <<<"$out")" =~ ^Total\ num\ output\ tokens:\ +[0-9]+$ ]] || {
  echo "FAIL: totals are not lines 2 and 3 of stdout: $out"; fail=1; }
[[ "$out" =~ Roofline:\ [0-9.]+%\ of\ this\ host\'s\ CPU\ \(measured:\ [0-9.]+\ GB/s ]] || {
  echo "FAIL: no CPU roofline on stdout: $out"; fail=1; }
python3 - "$tmp/t.json" "$(sed -n 1p <<<"$out")" <<'PY' || fail=1
import json, math, re, sys
d = json.load(open(sys.argv[1]))
for k in ["elapsed_time", "num_requests", "total_num_tokens", "requests_per_second", "tokens_per_second",
          "total_prompt_tokens", "total_output_tokens", "output_tokens_per_second", "layout", "pipeline_usage",
          "ttft_s", "tpot_s", "kv_cache", "peak_memory", "output_tokens_per_second_per_gpu", "roofline", "backend",
          "command_line", "model", "workload"]:
    assert k in d, f"missing {k}"
n, e = d["num_requests"], d["elapsed_time"]
assert n == 12 and e > 0, d
assert d["total_num_tokens"] == d["total_prompt_tokens"] + d["total_output_tokens"], d
# lengths drawn from [floor(l * 0.5), ceil(l * 1.5)]: prompts 8..24, outputs 4..12, all outputs produced (EOS ignored)
assert 8 * n <= d["total_prompt_tokens"] <= 24 * n and 4 * n <= d["total_output_tokens"] <= 12 * n, d
assert (d["total_prompt_tokens"], d["total_output_tokens"]) != (16 * n, 8 * n), "lengths were not randomized"
for rate, num in [("requests_per_second", n), ("tokens_per_second", d["total_num_tokens"]),
                  ("output_tokens_per_second", d["total_output_tokens"])]:
    assert math.isclose(d[rate], num / e, rel_tol=1e-9), (rate, d[rate], num / e)
assert math.isclose(d["output_tokens_per_second_per_gpu"], d["output_tokens_per_second"] / 2, rel_tol=1e-9)
line = [float(x) for x in re.findall(r"[0-9.]+", sys.argv[2])]
assert [round(x, 2) for x in line] == [round(d[k], 2) for k in
        ["requests_per_second", "tokens_per_second", "output_tokens_per_second"]], (line, d)
lay = d["layout"]
assert (lay["data"], lay["pipeline"], lay["tensor"], lay["micro_batches"]) == (1, 2, 1, 2), lay
assert len(lay["partition"]) == 2 and sum(lay["partition"]) == 5 and min(lay["partition"]) >= 1, lay
st = d["pipeline_usage"]["stages"]
assert [s["stage"] for s in st] == [0, 1], st
for s in st:
    assert abs(s["busy_pct"] + s["send_pct"] + s["bubble_pct"] - 100) < 1e-6 and s["busy_pct"] > 0, s
for key in ["ttft_s", "tpot_s"]:
    t = d[key]
    assert t["count"] == n and 0 < t["p50"] <= t["p90"] <= t["p99"] and t["mean"] > 0, (key, t)
assert d["ttft_s"]["p99"] <= e, d["ttft_s"]
kv = d["kv_cache"]
assert kv["num_blocks"] > 0 and kv["block_size"] > 0 and kv["preemptions"] == 0 and kv["plans"] > 0, kv
rss = d["peak_memory"]["host_max_rss_bytes"]
assert len(rss) == 2 and all(r > 1 << 20 for r in rss), rss
r = d["roofline"]
assert r["gpus"] == 2 and r["time_s"] == max(r["compute_time_s"], r["memory_time_s"]) > 0, r
assert math.isclose(r["share"], r["time_s"] / e, rel_tol=1e-9) and r["bound"] in ("memory", "compute"), r
# measured on this CPU: nowhere near an H200's 4.28 TB/s and 810 TFLOP/s; fp32 weights as the CPU backend runs
assert r["device"].startswith("this host's CPU") and r["dtype_bytes"] == 4, r
assert 0 < r["peak_bandwidth_tb_s_per_gpu"] < 1 and 0 < r["peak_tflops_per_gpu"] < 50, r
assert d["backend"] == "cpu" and d["command_line"].startswith("conveyor bench throughput --model"), d
PY
python3 -c "import json,sys; t=json.load(open(sys.argv[1])); assert t['traceEvents'] and 'conveyor_usage' in t" \
  "$tmp/trace.json" || { echo "FAIL: trace"; fail=1; }

# --- latency on one rank ------------------------------------------------------------------------------
out=$(timeout 120 "$bin" bench latency --model "$model" --input-len 12 --output-len 6 --batch-size 3 \
  --num-iters-warmup 1 --num-iters 4 --output-json "$tmp/l.json" --step-timeline "$tmp/steps.json" 2>"$tmp/l.err")
rc=$?
echo "$out"
[ $rc = 0 ] || { echo "FAIL: bench latency exit $rc"; cat "$tmp/l.err"; fail=1; }
for want in "Avg latency: " "50% percentile latency: " "90% percentile latency: " "99% percentile latency: "; do
  [[ "$out" == *"$want"* ]] || { echo "FAIL: latency output lacks '$want'"; fail=1; }
done
python3 - "$tmp/l.json" <<'PY' || fail=1
import json, math, sys
d = json.load(open(sys.argv[1]))
lat = d["latencies"]
assert len(lat) == 4 and all(x > 0 for x in lat), d
assert math.isclose(d["avg_latency"], sum(lat) / 4, rel_tol=1e-9), d
p = d["percentiles"]
assert set(p) == {"10", "25", "50", "75", "90", "99"} and min(lat) <= p["10"] <= p["50"] <= p["99"] <= max(lat), p
assert d["ttft_s"]["count"] == 12 and d["tpot_s"]["count"] == 12, d
assert d["layout"]["pipeline"] == 1 and d["layout"]["partition"] == [5], d["layout"]
assert len(d["peak_memory"]["host_max_rss_bytes"]) == 1 and d["roofline"]["gpus"] == 1, d
assert math.isclose(d["output_tokens_per_second"], 3 * 6 / d["avg_latency"], rel_tol=1e-9), d
PY
# --step-timeline: the anatomy of the steady decode steps (batch 3) accounts for the whole period, and
# every step's host phases are in the file, on one clock, in the order the leader runs them.
[[ "$out" =~ step\ timeline:\ [0-9]+\ decode\ steps\ of\ batch\ 3, ]] || { echo "FAIL: no step timeline: $out"; fail=1; }
python3 - "$tmp/steps.json" "$tmp/l.json" <<'PY' || fail=1
import json, math, sys
d = json.load(open(sys.argv[1]))
a = d["anatomy"]
assert json.load(open(sys.argv[2]))["step_timeline"] == a
assert a["batch"] == 3 and a["steps"] >= 10 and a["period_us"] > 0, a
names = [p["phase"] for p in a["phases"]]
assert names == ["schedule", "apply", "metadata", "forward", "sample", "wait", "post", "other"], names  # no device on the CPU
assert all(p["side"] == "host" and p["mean_us"] >= 0 for p in a["phases"] if p["phase"] != "other"), a
assert math.isclose(sum(p["mean_us"] for p in a["phases"]), a["period_us"], rel_tol=1e-9), a
assert math.isclose(sum(p["pct"] for p in a["phases"]), 100, rel_tol=1e-9), a
# The CPU's forward is the computation: in the median step (`example`), since one step's host hiccup can tilt
# the means of 22 short steps (CI once saw sample's mean at 59% from one slow step).
ex = a["example"]
fwd = [s for s in ex["spans"] if s["phase"] == "forward"]
assert len(fwd) == 1 and fwd[0]["end_us"] - fwd[0]["begin_us"] > 0.5 * ex["period_us"], ex
decode = {s["step"] for s in d["steps"] if s["decode"] and s["seqs"] == 3}
order = ["schedule", "apply", "forward", "sample", "wait", "post"]
for step in decode:
    spans = sorted((s for s in d["spans"] if s["step"] == step and s["phase"] in order), key=lambda s: s["begin_s"])
    assert [s["phase"] for s in spans] == order, (step, spans)
    assert all(x["end_s"] <= y["begin_s"] for x, y in zip(spans, spans[1:])), spans
    meta = [s for s in d["spans"] if s["step"] == step and s["phase"] == "metadata"]
    fwd = spans[2]
    assert len(meta) == 1 and fwd["begin_s"] <= meta[0]["begin_s"] <= meta[0]["end_s"] <= fwd["end_s"], (meta, fwd)
ex = a["example"]
assert ex["step"] in decode and ex["spans"][0]["begin_us"] == 0, ex
PY

# --- preemptions: 4 prompts of one 16-token block each fill 4 of 6 blocks, then all 4 grow into a second --
out=$(timeout 120 "$bin" bench throughput --model "$model" --input-len 12 --output-len 10 --num-prompts 6 \
  --max-num-seqs 4 --num-gpu-blocks-override 6 --output-json "$tmp/p.json" 2>"$tmp/p.err")
rc=$?
[ $rc = 0 ] || { echo "FAIL: preemption run exit $rc"; cat "$tmp/p.err"; fail=1; }
python3 - "$tmp/p.json" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
assert d["kv_cache"]["num_blocks"] == 6 and d["kv_cache"]["preemptions"] > 0, d["kv_cache"]
assert d["total_prompt_tokens"] == 6 * 12 and d["total_output_tokens"] == 6 * 10, d
PY

# --- errors -------------------------------------------------------------------------------------------
out=$("$bin" bench thruput --model "$model" --input-len 4 --output-len 4 2>&1)
[ $? = 1 ] && [[ "$out" == *"unknown bench mode 'thruput'"*"throughput"* ]] || { echo "FAIL: bad mode: $out"; fail=1; }
out=$("$bin" bench latency --model "$model" --input-len 500 --output-len 20 2>&1)
[ $? = 1 ] && [[ "$out" == *"= 520 positions but max_model_len is 512"* ]] || { echo "FAIL: too long: $out"; fail=1; }
out=$("$bin" bench throughput --model "$model" --output-len 4 2>&1)
[ $? = 1 ] && [[ "$out" == *"needs --input-len N and --output-len M"* ]] || { echo "FAIL: missing len: $out"; fail=1; }

# --- plan --compare: both layouts of 2 GPUs; tp=2 wins the memory-bound 1024/1024 batch -------------------
out=$("$bin" plan --compare --gpus 2 --set model.config="$configs/llama-3-70b.yaml" --batch 64 --input-len 1024 \
  --output-len 1024 --output-json "$tmp/c.json" 2>&1)
rc=$?
echo "$out"
[ $rc = 0 ] || { echo "FAIL: plan --compare exit $rc"; fail=1; }
for want in "pp=1 tp=2" "pp=2 tp=1" "41+39" "output tok/s" "links: all-reduce 300 GB/s"; do
  [[ "$out" == *"$want"* ]] || { echo "FAIL: plan --compare lacks '$want'"; fail=1; }
done
python3 - "$tmp/c.json" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["layouts"]
assert [(r["pipeline"], r["tensor"]) for r in rows] == [(1, 2), (2, 1)], rows
assert rows[0]["output_tokens_per_s"] > rows[1]["output_tokens_per_s"] > 0 and all(r["fits"] for r in rows), rows
assert rows[0]["bottleneck"] == "weights" and d["workload"]["gpus"] == 2, rows
PY
# link costs from a doctor report replace the defaults
echo '{"edges": [{"bandwidth_gbps": 20, "latency_us": 30}], "tensor_groups": [{"busbw_gbps": 50}]}' >"$tmp/doc.json"
out=$("$bin" plan --compare --gpus 2 --set model.config="$configs/llama-3-70b.yaml" --doctor-json "$tmp/doc.json" 2>&1)
[[ "$out" == *"all-reduce 50 GB/s busbw + 10.0 us, p2p 20 GB/s + 30.0 us (from --doctor-json)"* ]] || {
  echo "FAIL: doctor links: $out"; fail=1; }
[[ "$out" == *"device model: ideal roofline (no doctor measurements)"* ]] || { echo "FAIL: ideal not said: $out"; fail=1; }
# measured kernel speeds (tests/data/doctor_measured.json): said so, slower than the ideal roofline
data="$here/../data"
out=$("$bin" plan --compare --gpus 1 --set model.config="$configs/llama-3-8b.yaml" --batch 1 --input-len 128 \
  --output-len 128 --doctor "$data/doctor_measured.json" --output-json "$tmp/m.json" 2>&1)  # --doctor: unique prefix
rc=$?
[ $rc = 0 ] || { echo "FAIL: plan --compare --doctor exit $rc: $out"; fail=1; }
for want in "measured by conveyor doctor" "m=256 8.0 us + 2800 GB/s" "prefill attention: measured 50.0 TFLOP/s" \
  "host overhead per decode step and stage: 100 us"; do
  [[ "$out" == *"$want"* ]] || { echo "FAIL: plan --compare --doctor lacks '$want': $out"; fail=1; }
done
"$bin" plan --compare --gpus 1 --set model.config="$configs/llama-3-8b.yaml" --batch 1 --input-len 128 \
  --output-len 128 --output-json "$tmp/i.json" >/dev/null 2>&1
python3 - "$tmp/m.json" "$tmp/i.json" <<'PY' || fail=1
import json, sys
m, i = (json.load(open(p)) for p in sys.argv[1:])
assert m["device_model"]["measured"] and not i["device_model"]["measured"], (m["device_model"], i["device_model"])
assert abs(m["device_model"]["step_overhead_us"] - 100) < 1e-9 and i["device_model"]["step_overhead_us"] == 0, m["device_model"]
assert m["layouts"][0]["output_tokens_per_s"] < i["layouts"][0]["output_tokens_per_s"] / 1.4, (m, i)
assert m["layouts"][0]["busiest_stage_s"]["overhead"] > 0
PY
# a broken device section names the key
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); del d["device"]["graph_kernel"]["us"]; json.dump(d, open(sys.argv[2], "w"))' \
  "$data/doctor_measured.json" "$tmp/bad.json"
out=$("$bin" plan --compare --gpus 1 --set model.config="$configs/llama-3-8b.yaml" --doctor-json "$tmp/bad.json" 2>&1)
[ $? != 0 ] && [[ "$out" == *"device.graph_kernel.us is missing"* ]] || { echo "FAIL: bad device section: $out"; fail=1; }
rm -rf "$tmp"
exit $fail
