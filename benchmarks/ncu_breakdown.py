#!/usr/bin/env python3
"""Per-kernel breakdown of one profiled step from Nsight Compute's CSV.

Record one step (runtime.profile_step brackets it with cudaProfilerStart/Stop):
    ncu --profile-from-start off --clock-control none --metrics gpu__time_duration.sum --csv \
        --log-file step.csv build/conveyor bench latency ... --set runtime.profile_step=20
then: benchmarks/ncu_breakdown.py step.csv [--step-ms 5.4] [--json out.json]
Prints kernel time per group (GEMM, attention, norms, ...) and per kernel name, their share of the
summed kernel time and, given the step's wall time (--step-ms, e.g. TPOT), the time between kernels
(launch gaps, host work, syncs) as the rest. ncu serialises kernels, so times are each kernel alone.
"""
import argparse
import csv
import json
import re
import sys
from collections import defaultdict

GROUPS = [  # first match wins
    ("gemm", r"gemm|gemv|cutlass|xmma|sm90|sm80|cublas|splitKreduce|matmul", re.I),
    ("attention", r"attention|paged|flash|decode_split|reduce_splits", re.I),
    ("rope + kv write", r"rope|write_kv", re.I),
    ("norm", r"rms_norm|norm", re.I),
    ("silu_mul", r"silu", re.I),
    ("sampling", r"sampl|argmax|topk|top_k|top_p|softmax|cub::|radix|logprob|penalt|gather_logit", re.I),
    ("embedding", r"embedding", re.I),
    ("elementwise", r"add_kernel|convert|elementwise|copy|gather", re.I),
]
UNIT = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6}


def group_of(name):
    for g, pattern, flags in GROUPS:
        if re.search(pattern, name, flags):
            return g
    return "other"


def read(path):
    kernels = []  # (name, us)
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]  # ncu prints its own log lines before the CSV
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(row["Metric Value"].replace(",", ""))
        kernels.append((row["Kernel Name"], value * UNIT.get(row["Metric Unit"], 1e-3)))
    return kernels


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--step-ms", type=float, help="the step's wall time (e.g. TPOT p50) to show the gaps")
    ap.add_argument("--json", help="write the breakdown here")
    ap.add_argument("--top", type=int, default=15)
    a = ap.parse_args()
    kernels = read(a.csv)
    if not kernels:
        sys.exit(f"{a.csv}: no gpu__time_duration.sum rows (was a step profiled?)")
    total = sum(us for _, us in kernels)
    by_group, by_name, count = defaultdict(float), defaultdict(float), defaultdict(int)
    for name, us in kernels:
        short = re.sub(r"\(.*", "", name)[:90]
        by_group[group_of(name)] += us
        by_name[short] += us
        count[short] += 1
    print(f"{len(kernels)} kernels, {total:.1f} us of kernel time")
    rows = sorted(by_group.items(), key=lambda kv: -kv[1])
    for g, us in rows:
        print(f"  {g:16s} {us:10.1f} us  {100 * us / total:5.1f}%")
    gap = None
    if a.step_ms:
        gap = a.step_ms * 1e3 - total
        print(f"  {'between kernels':16s} {gap:10.1f} us  ({100 * gap / (a.step_ms * 1e3):.1f}% of the {a.step_ms} ms step)")
    print("top kernels:")
    for name, us in sorted(by_name.items(), key=lambda kv: -kv[1])[: a.top]:
        print(f"  {us:10.1f} us  x{count[name]:4d}  {name}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"source": a.csv, "kernels": len(kernels), "kernel_us": total, "step_ms": a.step_ms,
                       "between_kernels_us": gap, "groups_us": dict(rows),
                       "kernels_us": {n: {"us": us, "count": count[n]} for n, us in by_name.items()}}, f, indent=1)


if __name__ == "__main__":
    main()
