#!/usr/bin/env python3
"""How a CPU run's ranks met the scheduler, from a `conveyor bench throughput --trace` file (issue 18, 4(b)):

    benchmarks/trace_cpus.py TRACE.json[.gz]...

Per stage, over its decode compute spans (16 tokens or fewer): how often a span ends on the CPU the one before
ended on (args.cpu), and the median span by the turns its rank lost meanwhile (args.preempted: involuntary context
switches, 8 or more pooled). A span the rank ran alone is short with none lost; one that shared its CPU in turns
loses a few and takes about twice as long; many short interruptions (a napping rank's wake-ups) add little.
Then, per stage i, the share of its decode span time that overlaps stage j's decode spans ending on the same CPU
(i-j): how much of its time each stage shares a CPU, and with whom. Last, the share of the time k ranks are inside a
decode span at once (k = 0 .. stages), whatever their CPUs, the mean span per stage, and the hops: from a stage's
send to the next stage's span of the same micro-batch, where that stage was idle then, by the k other ranks inside
a span 5 us after the send (median, mean). A plan's `--trace`
(conveyor plan --cluster) carries the same fields for the simulated schedule, so the two print side by side."""
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


def concurrency(spans):
    """{k: share of the time from the first decode span's start to the last one's end with k spans open}."""
    edges = sorted([(e["ts"], 1) for e in spans] + [(e["ts"] + e["dur"], -1) for e in spans])
    share, k, last = collections.Counter(), 0, edges[0][0]
    for t, step in edges:
        share[k] += t - last
        last, k = t, k + step
    total = sum(share.values())
    return {k: v / total for k, v in sorted(share.items())}


def hops(spans):
    """{k: [ms from a send to the receiver's start, where it was idle, k other ranks in a span then]}."""
    by = {(e["args"]["micro_batch"], e["tid"]): e for e in spans}
    ends = collections.defaultdict(dict)
    for e in spans:
        ends[e["tid"]][e["ts"]] = e["ts"] + e["dur"]
    out = collections.defaultdict(list)
    for (mb, s), e in by.items():
        up = by.get((mb, s - 1))
        if up is None:
            continue
        sent = up["ts"] + up["dur"]
        if any(a < e["ts"] and b > sent for a, b in ends[s].items()):  # it was computing: queued, not a hop
            continue
        k = sum(1 for x in spans if x["tid"] != s and x["ts"] < sent + 5 < x["ts"] + x["dur"])
        out[k].append((e["ts"] - sent) / 1e3)
    return dict(sorted(out.items()))


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
        if decode:
            means = {s: statistics.mean(e["dur"] for e in decode if e["tid"] == s) / 1e3
                     for s in {e["tid"] for e in decode}}
            at_once = " ".join(f"{k}: {v:.2f}" for k, v in concurrency(decode).items())
            print(f"  ranks in a decode span at once: {at_once}; mean span " +
                  " ".join(f"{s}: {m:.1f} ms" for s, m in sorted(means.items())))
            cells = (f"{k}: {statistics.median(v):.2f} / {statistics.mean(v):.2f} ms (n {len(v)})"
                     for k, v in hops(decode).items())
            print("  hops to an idle stage, by ranks computing: " + " ".join(cells))


if __name__ == "__main__":
    main()
