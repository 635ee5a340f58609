#!/usr/bin/env python3
"""How a CPU run's ranks met the scheduler, from a `conveyor bench throughput --trace` file (issue 18, 4(b)):

    benchmarks/trace_cpus.py TRACE.json[.gz]...

Per stage, over its decode compute spans (16 tokens or fewer): how often a span ends on the CPU the one before
ended on (args.cpu), and the median span by the turns its rank lost meanwhile (args.preempted: involuntary context
switches, 8 or more pooled). A span the rank ran alone is short with none lost; one that shared its CPU in turns
loses a few and takes about twice as long; many short interruptions (a napping rank's wake-ups) add little."""
import collections
import gzip
import json
import statistics
import sys


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]


def main():
    for path in sys.argv[1:]:
        events = load(path)
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


if __name__ == "__main__":
    main()
