#!/usr/bin/env python3
"""Reads seeds.jsonl (seeds.py) and prints, per run, the tree's largest-stage gap and throughput ratio at each
layout and the candidate's min-max over seeds; then per layout and model how many runs hold (largest gap <= 5
points and throughput within 20%; in brackets each alone): the tree, the candidate at its first seed and at each
seed, and the runs that hold at every seed.

    seed_table.py [seeds.jsonl] [--models tree,candidate] [--layouts 3x1,4x1]"""
import argparse
import collections
import json
import os

LAYOUTS = [(1, 1), (2, 1), (3, 1), (4, 1), (2, 2)]


def load(path):
    rows = collections.defaultdict(dict)  # (run, model) -> {(pp, tp): {seed: row}}
    for line in open(path):
        r = json.loads(line)
        rows[(r["run"], r["model"])].setdefault((r["pp"], r["tp"]), {})[r["seed"]] = r
    return rows


def bubbles_held(r):
    return r["gap"] <= 5


def throughput_held(r):
    return abs(r["predicted_tok_s"] / r["measured_tok_s"] - 1) <= 0.2


def held(r):
    return bubbles_held(r) and throughput_held(r)


def span(vals, fmt="{:.1f}"):
    lo, hi = min(vals), max(vals)
    return fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else f"{fmt.format(lo)}-{fmt.format(hi)}"


def run_table(rows, runs, models, layouts):
    head = "| run |" + "".join(f" pp {p} x tp {t}: {m} gap (tok ratio) |" for p, t in layouts for m in models)
    print(head)
    print("|" + " --- |" * (1 + len(layouts) * len(models)))
    for run in runs:
        line = f"| {run} |"
        for layout in layouts:
            for m in models:
                seeds = rows[(run, m)][layout].values()
                gaps = [r["gap"] for r in seeds]
                ratios = [r["predicted_tok_s"] / r["measured_tok_s"] for r in seeds]
                line += f" {span(gaps)} ({span(ratios, '{:.2f}')}) |"
        print(line)


def hold_table(rows, runs, models):
    seeds = sorted({s for run in runs for s in rows[(run, models[-1])][LAYOUTS[0]]})
    cols = [(m, None) for m in models] + [(models[-1], s) for s in seeds]
    print("| layout |" + "".join(f" {m}{'' if s is None else f' seed {s}'} |" for m, s in cols) + " candidate, every seed |")
    print("|" + " --- |" * (2 + len(cols)))
    for layout in LAYOUTS:
        line = f"| pp {layout[0]} x tp {layout[1]} |"
        for m, s in cols:
            picked = [rows[(run, m)][layout][s if s is not None else min(rows[(run, m)][layout])] for run in runs]
            n, b, t = (sum(map(f, picked)) for f in (held, bubbles_held, throughput_held))
            line += f" {n} of {len(runs)} ({b} / {t}) |"
        every = sum(all(held(r) for r in rows[(run, models[-1])][layout].values()) for run in runs)
        print(line + f" {every} of {len(runs)} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("path", nargs="?", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "seeds.jsonl"))
    ap.add_argument("--models", default="tree,candidate")
    ap.add_argument("--layouts", default=",".join(f"{p}x{t}" for p, t in LAYOUTS), help="for the per-run table")
    a = ap.parse_args()
    rows = load(a.path)
    models = a.models.split(",")
    runs = list(dict.fromkeys(run for run, _ in rows))
    layouts = [tuple(int(x) for x in l.split("x")) for l in a.layouts.split(",")]
    run_table(rows, runs, models, layouts)
    print()
    hold_table(rows, runs, models)


if __name__ == "__main__":
    main()
