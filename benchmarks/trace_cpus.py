#!/usr/bin/env python3
"""How a CPU run's ranks met the scheduler, from a `conveyor bench throughput --trace` file (issue 18, 4(b)):

    benchmarks/trace_cpus.py TRACE.json[.gz]...

Per stage, over its decode compute spans (16 tokens or fewer): how often a span ends on the CPU the one before
ended on (args.cpu), and the median span by the turns its rank lost meanwhile (args.preempted: involuntary context
switches, 8 or more pooled). A span the rank ran alone is short with none lost; one that shared its CPU in turns
loses a few and takes about twice as long; many short interruptions (a napping rank's wake-ups) add little.
Then, per stage i, the share of its decode span time that overlaps stage j's decode spans ending on the same CPU
(i-j): how much of its time each stage shares a CPU, and with whom. A plan's `--trace` (conveyor plan --cluster)
carries the same fields for the simulated schedule, so the two print side by side."""
import collections
import gzip
import json
import statistics
import sys


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]


def co_located(spans):
    """{(i, j): share of stage i's decode span time overlapping stage j's spans that ended on the same CPU}."""
    shared, total = collections.Counter(), collections.Counter()
    for a in spans:
        total[a["tid"]] += a["dur"]
        for b in spans:
            if b["tid"] == a["tid"] or b["args"]["cpu"] != a["args"]["cpu"]:
                continue
            overlap = min(a["ts"] + a["dur"], b["ts"] + b["dur"]) - max(a["ts"], b["ts"])
            if overlap > 0:
                shared[(a["tid"], b["tid"])] += overlap
    return {k: v / total[k[0]] for k, v in sorted(shared.items())}


def main():
    for path in sys.argv[1:]:
        events = load(path)
        decode = [e for e in events if e["cat"] == "compute" and e["args"].get("tokens", 99) <= 16 and
                  "cpu" in e["args"]]
        print(path)
        for stage in sorted({e["tid"] for e in events if e["cat"] == "compute"}):
            spans = sorted((e for e in events if e["tid"] == stage and e["cat"] == "compute" and
                            e["args"].get("tokens", 99) <= 16 and "cpu" in e["args"]), key=lambda e: e["ts"])
            if len(spans) < 2:
                continue
            same = sum(a["args"]["cpu"] == b["args"]["cpu"] for a, b in zip(spans, spans[1:])) / (len(spans) - 1)
            by = collections.defaultdict(list)
            for e in spans:
                if e["args"].get("preempted", -1) >= 0:
                    by[min(e["args"]["preempted"], 8)].append(e["dur"] / 1e3)
            cells = " ".join(f"{k}{'+' if k == 8 else ''}: {statistics.median(v):.1f} ms (n {len(v)})"
                             for k, v in sorted(by.items()))
            print(f"  stage {stage}: {len(spans)} decode spans, same CPU as the one before {same:.2f}; by turns lost: "
                  f"{cells}")
        pairs = co_located(decode)
        print("  time sharing a CPU with: " + " ".join(f"{i}-{j} {v:.2f}" for (i, j), v in pairs.items()))


if __name__ == "__main__":
    main()
