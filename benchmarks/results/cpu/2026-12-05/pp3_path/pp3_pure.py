#!/usr/bin/env python3
"""pp 3: decode spans of the run that spent >= 90% of their time with exactly n stages computing, and the speed
they got: the span's solo work (its integral of doctor's speed over the simulated span) / its run duration.

    pp3_pure.py RUN_TRACE SIM_TRACE DOCTOR_JSON"""
import json
import sys

import numpy as np

from pp3_rates import split
from pp3_spans import spans

speed = np.array(json.load(open(sys.argv[3]))["device"]["sharing"]["speed"])
R, S = spans(sys.argv[1]), spans(sys.argv[2])
TR, TS = split(R), split(S)
for n in (1, 2, 3):
    for st in (0, 1, 2):
        v = [(TS[k] @ speed) / TR[k].sum() for k in R if k[0] == st and R[k][2] <= 16 and TR[k][n - 1] >= 0.9 * TR[k].sum()]
        if v:
            print(f"n={n} stage {st}: {len(v):3d} spans, speed median {np.median(v):.3f}, quartiles {np.percentile(v, 25):.3f}-{np.percentile(v, 75):.3f} (doctor {speed[n - 1]:.3f})")
