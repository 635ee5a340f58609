#!/usr/bin/env python3
"""The README's tables: per fresh run (benchmarks/sim_cpu.py --out runN) and layout, measured vs predicted with
the run-queue model (plan_ppP_tpT.json, what sim_cpu.py ran) and without it (plan_ppP_tpT_ps.json, resim.py
--no-sticky --tag ps: processor sharing for TP-less ranks, the model before).

    summary.py run1 run2 ..."""
import json
import os
import sys

LAYOUTS = [(1, 1), (2, 1), (3, 1), (4, 1), (2, 2)]


def row(run, pp, tp):
    b = json.load(open(os.path.join(run, f"bench_pp{pp}_tp{tp}.json")))
    m = [x["bubble_pct"] for x in b["pipeline_usage"]["stages"]]
    out = {"tok": b["output_tokens_per_second"], "m": m}
    for tag, name in (("", "new"), ("_ps", "ps")):
        s = json.load(open(os.path.join(run, f"plan_pp{pp}_tp{tp}{tag}.json")))["layouts"][0]
        p = [100 * x["bubble"] for x in s["stages"]]
        out[name] = {"tok": s["output_tokens_per_s"], "p": p, "gap": max(abs(x - y) for x, y in zip(m, p))}
    return out


def main():
    fmt = lambda v: " / ".join(f"{x:.1f}" for x in v)
    print("| run | layout | tok/s measured | predicted (ratio) | bubble % measured | predicted, run queues | gap | "
          "predicted, before (PS) | gap |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    held = {}
    for run in sys.argv[1:]:
        for pp, tp in LAYOUTS:
            r = row(run, pp, tp)
            n, p = r["new"], r["ps"]
            ratio = n["tok"] / r["tok"]
            print(f"| {os.path.basename(run)} | pp {pp} x tp {tp} | {r['tok']:.1f} | {n['tok']:.1f} ({ratio:.2f}) | {fmt(r['m'])} | "
                  f"{fmt(n['p'])} | {n['gap']:.1f} | {fmt(p['p'])} | {p['gap']:.1f} |")
            h = held.setdefault((pp, tp), [0, 0, 0])
            h[0] += n["gap"] <= 5
            h[1] += p["gap"] <= 5
            h[2] += abs(ratio - 1) <= 0.2
    print("\n| layout | bubbles within 5 points, run queues | before (PS) | throughput within 20% |")
    print("| --- | --- | --- | --- |")
    k = len(sys.argv) - 1
    for (pp, tp), (a, b, c) in held.items():
        print(f"| pp {pp} x tp {tp} | {a} of {k} | {b} of {k} | {c} of {k} |")


if __name__ == "__main__":
    main()
