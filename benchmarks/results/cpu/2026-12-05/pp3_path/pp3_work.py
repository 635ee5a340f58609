#!/usr/bin/env python3
"""pp 3: each span's solo-equivalent work (integral of doctor's speed[n - 1] over the span, n = stages computing
then), run vs sim, and each stage's start delay (start - max(previous stage's end of the micro-batch, own
previous end)), by how many other stages were computing when it started.

    pp3_work.py RUN_TRACE SIM_TRACE DOCTOR_JSON"""
import collections
import json
import sys

from pp3_spans import spans


def work_and_delays(sp, speed):
    P = max(s for s, _ in sp) + 1
    n = max(mb for _, mb in sp) + 1
    pts = sorted({a for a, _, _ in sp.values()} | {b for _, b, _ in sp.values()})
    iv = sorted(sp.items(), key=lambda kv: kv[1][0])
    def busy_at(t, excl=None):
        return sum(1 for (s, m), (a, b, _) in sp.items() if a <= t < b and s != excl)
    # integrate per span
    work = {}
    segs = []
    for i in range(len(pts) - 1):
        a, b = pts[i], pts[i + 1]
        segs.append((a, b))
    # active sets per segment via sweep
    ev = sorted([(a, 1, k) for k, (a, b, _) in sp.items()] + [(b, 0, k) for k, (a, b, _) in sp.items()])
    act, last = set(), None
    w = collections.defaultdict(float)
    for t, d, k in ev:
        if last is not None and act:
            r = speed[min(len(act), len(speed)) - 1]
            for kk in act: w[kk] += (t - last) * r
        last = t
        if d: act.add(k)
        else: act.discard(k)
    delays = collections.defaultdict(list)
    for s in range(1, P):
        for m in range(1, n):
            if (s, m) not in sp: continue
            ready = max(sp[(s - 1, m)][1], sp[(s, m - 1)][1])
            others = busy_at(sp[(s, m)][0] - 1e-6, s)
            delays[(s, min(others, 2))].append(sp[(s, m)][0] - ready)
    return w, delays, P, n


if __name__ == "__main__":
    speed = json.load(open(sys.argv[3]))["device"]["sharing"]["speed"]
    R, S = spans(sys.argv[1]), spans(sys.argv[2])
    wr, dr, P, n = work_and_delays(R, speed)
    ws, ds, _, _ = work_and_delays(S, speed)
    for s in range(P):
        dec = [m for m in range(n) if (s, m) in R and R[(s, m)][2] <= 16]
        pre = [m for m in range(n) if (s, m) in R and R[(s, m)][2] > 16]
        f = lambda w, ms: sum(w[(s, m)] for m in ms)
        print(f"stage {s}: solo-equivalent work, decode {f(wr, dec):.0f} run / {f(ws, dec):.0f} sim ms"
              f" ({len(dec)} spans), prefill {f(wr, pre):.0f} / {f(ws, pre):.0f}")
    for key in sorted(set(dr) | set(ds)):
        a, b = dr.get(key, []), ds.get(key, [])
        mean = lambda x: sum(x) / len(x) if x else float("nan")
        print(f"stage {key[0]} start delay with {key[1]} other stages computing: run {len(a)} x {mean(a):.2f} ms"
              f" (sum {sum(a):.0f}), sim {len(b)} x {mean(b):.2f} ms (sum {sum(b):.0f})")
