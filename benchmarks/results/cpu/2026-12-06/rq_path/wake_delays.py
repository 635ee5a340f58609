#!/usr/bin/env python3
"""Wake-up delays of a pipeline's stages, run against simulation: for each stage s > 0 and micro-batch, its
compute start minus max(stage s-1's end of it, its own end of the one before), split by how many other stages
were computing at that instant (the message in hand and the rank free: what's left is waking and getting a CPU).

    wake_delays.py RUN_TRACE SIM_TRACE"""
import collections
import gzip
import json
import sys


def spans(path):
    t = json.load(gzip.open(path) if path.endswith(".gz") else open(path))
    return {(e["tid"], e["args"]["micro_batch"]): (e["ts"] / 1e3, (e["ts"] + e["dur"]) / 1e3)
            for e in t["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "compute"}


def delays(sp):
    P = max(s for s, _ in sp) + 1
    out = collections.defaultdict(list)
    for (s, mb), (a, b) in sp.items():
        if s == 0 or (s - 1, mb) not in sp:
            continue
        ready = max(sp[(s - 1, mb)][1], sp.get((s, mb - 1), (0, 0))[1])
        busy = sum(1 for (s2, m2), (a2, b2) in sp.items() if s2 != s and a2 <= ready < b2)
        out[(s, busy)].append(a - ready)
    return P, out


for name, path in (("run", sys.argv[1]), ("sim", sys.argv[2])):
    P, d = delays(spans(path))
    print(f"== {name}")
    for s in range(1, P):
        print(f"  stage {s}: " + "; ".join(f"{k} others computing: {len(v)} x {sum(v) / len(v):.2f} ms"
                                          for (st, k), v in sorted(d.items()) if st == s))
