#!/usr/bin/env python3
"""pp 2 x tp 2: the compute spans of each stage (its tp 0 rank) per micro-batch, run vs simulation, around the
three prefill waves, and each stage's compute summed over the prefill waves' micro-batches and over the rest.

    decode_beside_prefill.py RUN_TRACE.json SIM_TRACE.json   (.json or .json.gz, as benchmarks/sim_cpu.py writes)"""
import gzip
import json
import sys


def spans(path):
    t = json.load(gzip.open(path) if path.endswith(".gz") else open(path))
    out = {}
    for e in t["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "compute" and e["tid"] in (0, 2):
            out[(e["tid"] // 2, e["args"]["micro_batch"])] = (e["ts"] / 1e3, e["dur"] / 1e3)
    return out


def main(run_path, sim_path):
    r, s = spans(run_path), spans(sim_path)
    n = max(mb for _, mb in r) + 1
    wave = lambda mb: mb % 64 < 3 or mb % 64 == 63  # two prefills, the decode beside each, per wave of 64
    print("micro-batch | stage 0 ms run / sim | stage 1 ms run / sim")
    for mb in [0, 1, 2, 3, 63, 64, 65, 66, 67]:
        if mb < n:
            print(f"{mb:11d} | {r[(0, mb)][1]:7.1f} / {s[(0, mb)][1]:7.1f} | {r[(1, mb)][1]:7.1f} / {s[(1, mb)][1]:7.1f}")
    for st in (0, 1):
        rw = sum(r[(st, mb)][1] for mb in range(n) if wave(mb)); sw = sum(s[(st, mb)][1] for mb in range(n) if wave(mb))
        rd = sum(r[(st, mb)][1] for mb in range(n) if not wave(mb)); sd = sum(s[(st, mb)][1] for mb in range(n) if not wave(mb))
        print(f"stage {st}: prefill waves {rw:.0f} ms run / {sw:.0f} sim; other micro-batches {rd:.0f} / {sd:.0f}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
