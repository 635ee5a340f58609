#!/usr/bin/env python3
"""pp 3 (3 ranks on 2 CPUs): run vs simulation from the two traces benchmarks/sim_cpu.py writes.
Per stage: compute, idle and the hop (previous stage's end -> this stage's start of the same micro-batch);
compute split by how many stages computed at the same time; each stage's decode spans by how many other
stages were computing when it started.

    pp3_spans.py RUN_TRACE.json SIM_TRACE.json   (.json or .json.gz)"""
import collections
import gzip
import json
import sys


def spans(path):
    t = json.load(gzip.open(path) if path.endswith(".gz") else open(path))
    out = {}
    for e in t["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "compute":
            out[(e["tid"], e["args"]["micro_batch"])] = (e["ts"] / 1e3, (e["ts"] + e["dur"]) / 1e3, e["args"].get("tokens", 0))
    return out


def busy_profile(sp, P):
    # time (ms) during which exactly n stages computed, and per stage its compute time split by n
    pts = sorted([(a, 1, s) for (s, _), (a, b, _) in sp.items()] + [(b, -1, s) for (s, _), (a, b, _) in sp.items()])
    busy, last, prof, per = set(), pts[0][0], collections.Counter(), collections.defaultdict(collections.Counter)
    for t, d, s in pts:
        dt = t - last
        prof[len(busy)] += dt
        for b in busy: per[b][len(busy)] += dt
        last = t
        if d > 0: busy.add(s)
        else: busy.discard(s)
    return prof, per


def report(name, sp):
    P = max(s for s, _ in sp) + 1
    n = max(mb for _, mb in sp) + 1
    t0 = min(a for a, _, _ in sp.values()); t1 = max(b for _, b, _ in sp.values())
    print(f"== {name}: {P} stages, {n} micro-batches, window {t1 - t0:.0f} ms")
    prof, per = busy_profile(sp, P)
    print("  time with n stages computing: " + ", ".join(f"n={k}: {v:.0f}" for k, v in sorted(prof.items())))
    for s in range(P):
        comp = sum(sp[(s, m)][1] - sp[(s, m)][0] for m in range(n) if (s, m) in sp)
        dec = [sp[(s, m)][1] - sp[(s, m)][0] for m in range(n) if (s, m) in sp and sp[(s, m)][2] <= 16]
        hops = [sp[(s, m)][0] - sp[(s - 1, m)][1] for m in range(n) if s > 0 and (s, m) in sp]
        print(f"  stage {s}: compute {comp:.0f} ms ({100 * comp / (t1 - t0):.1f}%), bubble {100 - 100 * comp / (t1 - t0):.1f}%,"
              f" decode spans {len(dec)} mean {sum(dec) / max(1, len(dec)):.2f} ms;"
              + (f" hop mean {sum(hops) / len(hops):.2f} ms, min {min(hops):.2f}" if hops else "")
              + "; compute by n busy: " + ", ".join(f"{k}: {v:.0f}" for k, v in sorted(per[s].items())))
    return sp


if __name__ == "__main__":
    report("run", spans(sys.argv[1]))
    report("sim", spans(sys.argv[2]))
