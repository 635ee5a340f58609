#!/usr/bin/env python3
"""pp 3: every decode span's speed (its solo work, the integral of doctor's speed over the simulated span, / its
duration), run vs simulation, per stage: quartiles and the share of spans under 0.55 (a rank sharing one CPU
with another) and over 0.8 (a CPU of its own).

    pp3_speeds.py RUN_TRACE SIM_TRACE DOCTOR_JSON"""
import json
import sys

import numpy as np

from pp3_rates import split
from pp3_spans import spans

speed = np.array(json.load(open(sys.argv[3]))["device"]["sharing"]["speed"])
R, S = spans(sys.argv[1]), spans(sys.argv[2])
TS = split(S)
P = max(s for s, _ in R) + 1
for st in range(P):
    for name, X in (("run", R), ("sim", S)):
        v = np.array([(TS[k] @ speed) / (X[k][1] - X[k][0]) for k in R if k[0] == st and R[k][2] <= 16 and k in S])
        print(f"stage {st} {name}: quartiles {np.percentile(v, 25):.2f} / {np.median(v):.2f} / {np.percentile(v, 75):.2f},"
              f" < 0.55: {np.mean(v < 0.55) * 100:.0f}%, > 0.8: {np.mean(v > 0.8) * 100:.0f}%")
