#!/usr/bin/env python3
"""How much of a pipeline's GPU transfer time overlaps compute, from a `--trace` file of a CUDA run.

Device tracks (one per rank) hold "gpu compute" and "gpu transfer" spans per micro-batch (args: stage,
micro_batch). Printed per track: the transfer time that overlaps the same rank's compute, and the time
that overlaps other ranks' compute (ranks sharing one GPU run their kernels side by side). Then, per
pipeline edge, the property the pipeline is built for: while micro-batch m travels from stage s to
s+1 (from the start of stage s's transfer of m to the end of stage s+1's transfer of m), stage s already
computes m+1; the share of that travel time during which it does.
Usage: benchmarks/trace_overlap.py TRACE.json
"""
import json
import sys


def overlap(spans, others):
    return sum(max(0.0, min(b, d) - max(a, c)) for a, b in spans for c, d in others)


def main(path):
    events = [e for e in json.load(open(path))["traceEvents"] if e.get("ph") == "X"]
    comp, xfer = {}, {}  # track -> [(start, end)]; (stage, micro-batch) -> span
    by_stage = {"gpu compute": {}, "gpu transfer": {}}
    for e in events:
        if e.get("cat") not in by_stage:
            continue
        span = (e["ts"], e["ts"] + e["dur"])
        (comp if e["cat"] == "gpu compute" else xfer).setdefault(e["tid"], []).append(span)
        args = e.get("args", {})
        if "stage" in args and "micro_batch" in args:
            by_stage[e["cat"]][(args["stage"], args["micro_batch"])] = span
    for tid in sorted(xfer):
        total = sum(b - a for a, b in xfer[tid])
        own = overlap(xfer[tid], comp.get(tid, []))
        others = overlap(xfer[tid], [s for t, spans in comp.items() if t != tid for s in spans])
        print(f"trace track {tid}: {len(comp.get(tid, []))} gpu compute spans, {len(xfer[tid])} transfers, "
              f"{total / 1e3:.1f} ms of transfer: {own / 1e3:.1f} ms overlap this rank's compute, "
              f"{others / 1e3:.1f} ms other ranks' compute")
    stages = sorted({s for s, _ in by_stage["gpu compute"]})
    for s in stages[:-1]:
        travel = hidden = 0.0
        for (st, m), (a, _) in by_stage["gpu transfer"].items():
            arrive = by_stage["gpu transfer"].get((s + 1, m))
            nxt = by_stage["gpu compute"].get((s, m + 1))
            if st != s or arrive is None or nxt is None or arrive[1] <= a:
                continue
            travel += arrive[1] - a
            hidden += overlap([(a, arrive[1])], [nxt])
        if travel:
            print(f"stage {s} -> {s + 1}: micro-batch m travels {travel / 1e3:.1f} ms in all; stage {s} computes "
                  f"m+1 during {hidden / 1e3:.1f} ms of it ({100 * hidden / travel:.0f}%)")


if __name__ == "__main__":
    main(sys.argv[1])
