#!/usr/bin/env python3
"""The README's tables: per run (benchmarks/sim_cpu.py --out runN) and layout, measured vs predicted with doctor's
ring probe (plan_ppP_tpT.json, what sim_cpu.py ran) and without it (plan_ppP_tpT_norg.json, made by
../rq_path/resim.py runN --drop pipeline_speed --tag norg: the run-queue model of rq_path as it was).
The largest per-stage bubble gap of each row, and per layout how many runs hold (5 points, 20% throughput).

    summary.py [--tags "":ring,_norg:before] run1 run2 ..."""
import argparse
import json
import os

LAYOUTS = [(1, 1), (2, 1), (3, 1), (4, 1), (2, 2)]


def plan(run, pp, tp, tag, m):
    s = json.load(open(os.path.join(run, f"plan_pp{pp}_tp{tp}{tag}.json")))["layouts"][0]
    p = [100 * x["bubble"] for x in s["stages"]]
    return {"tok": s["output_tokens_per_s"], "p": p, "gap": max(abs(x - y) for x, y in zip(m, p))}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tags", default=":ring,_norg:before")
    ap.add_argument("runs", nargs="+")
    a = ap.parse_args()
    tags = [t.split(":") for t in a.tags.split(",")]
    fmt = lambda v: " / ".join(f"{x:.1f}" for x in v)
    head = "| run | layout | tok/s measured | bubble % measured |"
    for _, name in tags:
        head += f" {name}: tok/s (ratio) | bubble % | gap |"
    print(head)
    print("|" + " --- |" * (4 + 3 * len(tags)))
    held = {}
    for run in a.runs:
        for pp, tp in LAYOUTS:
            b = json.load(open(os.path.join(run, f"bench_pp{pp}_tp{tp}.json")))
            m = [x["bubble_pct"] for x in b["pipeline_usage"]["stages"]]
            tok = b["output_tokens_per_second"]
            line = f"| {os.path.basename(run.rstrip('/'))} | pp {pp} x tp {tp} | {tok:.1f} | {fmt(m)} |"
            for tag, name in tags:
                p = plan(run, pp, tp, tag, m)
                line += f" {p['tok']:.1f} ({p['tok'] / tok:.2f}) | {fmt(p['p'])} | {p['gap']:.1f} |"
                h = held.setdefault((pp, tp, name), [0, 0, 0])
                h[0] += p["gap"] <= 5
                h[1] += abs(p["tok"] / tok - 1) <= 0.2
                h[2] += 1
            print(line)
    print()
    print("| layout |" + "".join(f" {n}: bubbles within 5 | {n}: throughput within 20% |" for _, n in tags))
    print("|" + " --- |" * (1 + 2 * len(tags)))
    for pp, tp in LAYOUTS:
        print(f"| pp {pp} x tp {tp} |" + "".join(
            f" {held[(pp, tp, n)][0]} of {held[(pp, tp, n)][2]} | {held[(pp, tp, n)][1]} of {held[(pp, tp, n)][2]} |"
            for _, n in tags))


if __name__ == "__main__":
    main()
