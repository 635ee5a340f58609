#!/usr/bin/env python3
"""The speed a stage's decode spans got in the run while n stages computed, fitted by least squares:
each span's work is taken from the simulation (its integral of doctor's speed over the simulated span, which
is the span's solo work), the run's span split into the time it spent with n = 1, 2, 3 stages computing.

    pp3_rates.py RUN_TRACE SIM_TRACE DOCTOR_JSON"""
import collections
import json
import sys

import numpy as np

from pp3_spans import spans


def split(sp):
    ev = sorted([(a, 1, k) for k, (a, b, _) in sp.items()] + [(b, 0, k) for k, (a, b, _) in sp.items()])
    act, last, T = set(), None, collections.defaultdict(lambda: np.zeros(4))
    for t, d, k in ev:
        if last is not None:
            for kk in act: T[kk][min(len(act), 4) - 1] += t - last
        last = t
        if d: act.add(k)
        else: act.discard(k)
    return T


if __name__ == "__main__":
    speed = np.array(json.load(open(sys.argv[3]))["device"]["sharing"]["speed"])
    R, S = spans(sys.argv[1]), spans(sys.argv[2])
    TR, TS = split(R), split(S)
    for stages in ([0], [1], [2], [0, 1, 2]):
        keys = [k for k in R if k[0] in stages and R[k][2] <= 16 and k in S]
        W = np.array([TS[k] @ speed for k in keys])
        A = np.array([TR[k][:3] for k in keys])
        r, *_ = np.linalg.lstsq(A, W, rcond=None)
        print(f"stages {stages}: fitted speed with n = 1, 2, 3 computing: {np.round(r, 3)} (doctor {np.round(speed[:3], 3)});"
              f" run time by n {np.round(A.sum(0)).astype(int)}")
