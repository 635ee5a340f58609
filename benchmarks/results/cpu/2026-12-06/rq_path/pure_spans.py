#!/usr/bin/env python3
"""Any pp: decode spans of a run that spent >= 90% of their time with exactly n stages computing, and the
speed they got (the span's solo work, its integral of doctor's speed over the simulated span, / its run
duration), per stage: which ranks a CPU host doubles up (pp3_path/pp3_pure.py for any P).

    pure_spans.py RUN_TRACE SIM_TRACE DOCTOR_JSON"""
import collections
import gzip
import json
import sys

import numpy as np


def spans(path):
    t = json.load(gzip.open(path) if path.endswith(".gz") else open(path))
    return {(e["tid"], e["args"]["micro_batch"]): (e["ts"] / 1e3, (e["ts"] + e["dur"]) / 1e3, e["args"].get("tokens", 0))
            for e in t["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "compute"}


def split(sp, P):
    ev = sorted([(a, 1, k) for k, (a, b, _) in sp.items()] + [(b, 0, k) for k, (a, b, _) in sp.items()])
    act, last, T = set(), None, collections.defaultdict(lambda: np.zeros(P))
    for t, d, k in ev:
        if last is not None:
            for kk in act: T[kk][len(act) - 1] += t - last
        last = t
        if d: act.add(k)
        else: act.discard(k)
    return T


if __name__ == "__main__":
    speed = np.array(json.load(open(sys.argv[3]))["device"]["sharing"]["speed"])
    R, S = spans(sys.argv[1]), spans(sys.argv[2])
    P = max(s for s, _ in R) + 1
    sp = np.array([speed[min(i, len(speed) - 1)] if i < len(speed) else speed[-1] * len(speed) / (i + 1) for i in range(P)])
    TR, TS = split(R, P), split(S, P)
    for n in range(2, P + 1):
        for st in range(P):
            v = [(TS[k] @ sp) / TR[k].sum() for k in R if k in S and k[0] == st and R[k][2] <= 16
                 and TR[k][n - 1] >= 0.9 * TR[k].sum()]
            if v:
                lo = sum(x < 0.55 for x in v) / len(v)
                print(f"n={n} stage {st}: {len(v):3d} spans, speed median {np.median(v):.2f}, quartiles "
                      f"{np.percentile(v, 25):.2f}-{np.percentile(v, 75):.2f}, under 0.55: {100 * lo:.0f}% (doctor {sp[n - 1]:.2f})")
