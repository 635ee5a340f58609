#!/usr/bin/env python3
"""How fast a CPU pipeline's stages really ran while k ranks computed, from a sim_cpu.py output folder
(issue 18, 4(b)): benchmarks/sim_cpu_sharing_fit.py DIR ppP_tpT

For every compute span of the run's trace (trace_ppP_tpT.json, or .json.gz) the time spent with k = 1, 2, ... ranks
computing, and the span's solo work as the simulator costed it (its own span in sim_trace_ppP_tpT.json
times doctor.json's sharing speed at each k it saw there); then a least-squares fit of
run duration = sum_k solo * share_k / speed_k gives the speeds the run achieved, printed beside the
doctor's. A fitted speed at k = 1 under 1 says the simulator's solo cost is that much low; the speeds
at k > 1 over it are the run's sharing, to set against the doctor's probe. Needs numpy."""
import collections
import gzip
import json
import os
import sys

import numpy as np


def spans(path):
    d = json.load(open(path) if os.path.exists(path) else gzip.open(path + ".gz", "rt"))
    by = collections.defaultdict(list)
    for e in d["traceEvents"] if isinstance(d, dict) else d:
        if e.get("ph") == "X" and e.get("cat") == "compute":
            by[e["tid"]].append((e["ts"], e["ts"] + e["dur"]))
    return {k: sorted(v) for k, v in by.items()}


def shares(by, s, e, ranks):
    """Time in [s, e] with k ranks computing, k = 0..ranks."""
    cuts = {s, e}
    for sp in by.values():
        for a, b in sp:
            if a < e and b > s:
                cuts.update((max(a, s), min(b, e)))
    cuts = sorted(cuts)
    out = np.zeros(ranks + 1)
    for a, b in zip(cuts, cuts[1:]):
        mid = (a + b) / 2
        out[sum(1 for sp in by.values() for x, y in sp if x <= mid < y)] += b - a
    return out


def main():
    folder, layout = sys.argv[1], sys.argv[2]
    speed = json.load(open(os.path.join(folder, "doctor.json")))["device"]["sharing"]["speed"]
    run = spans(os.path.join(folder, f"trace_{layout}.json"))
    sim = spans(os.path.join(folder, f"sim_trace_{layout}.json"))
    ranks = len(run)
    rows, durations = [], []
    for tid in run:
        for (a, b), (c, d) in zip(run[tid], sim[tid]):
            sim_k = shares(sim, c, d, ranks)
            solo = sum(sim_k[k] * speed[k - 1] for k in range(1, ranks + 1))
            run_k = shares(run, a, b, ranks)
            rows.append([solo * run_k[k] / run_k.sum() for k in range(1, ranks + 1)])
            durations.append(b - a)
    a = np.array(rows)
    inv, *_ = np.linalg.lstsq(a, np.array(durations), rcond=None)
    print(f"{layout}: speed while k ranks compute, k = 1..{ranks}")
    print("  fitted from the run:", " ".join(f"{1 / x:.3f}" for x in inv))
    print("  doctor's probe:     ", " ".join(f"{x:.3f}" for x in speed[:ranks]))
    print("  run time by k:      ", " ".join(f"{x:.3f}" for x in a.sum(0) / a.sum()))


if __name__ == "__main__":
    main()
