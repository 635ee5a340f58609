#!/usr/bin/env python3
"""Render a conveyor --trace (Chrome trace JSON) as a PNG timeline: one row per rank, one color per phase.

Gaps between spans are the bubbles (nothing to do while other stages work). The title carries the
run's per-stage usage (busy / send / bubble %) that conveyor computed from the same spans.

    mpirun -np 2 conveyor generate ... -pp 2 --trace t.json
    python3 benchmarks/plot_trace.py t.json -o t.png [--from-ms 100 --to-ms 160 | --middle-ms 50]
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

PHASE_COLORS = {"compute": "#2b8cbe", "send": "#f03b20", "recv": "#bdbdbd", "wait": "#fdae6b"}


def load(path):
    with open(path) as f:
        trace = json.load(f)
    names, spans = {}, {}
    for e in trace.get("traceEvents", []):
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[e["tid"]] = e["args"]["name"]
        elif e.get("ph") == "X":
            spans.setdefault(e["tid"], []).append((e["ts"] / 1e3, e["dur"] / 1e3, e.get("cat", "?")))
    if not spans:
        sys.exit(f"plot_trace: {path} has no spans ('X' events); was it written by conveyor --trace?")
    return names, spans, trace.get("conveyor_usage", {})


def usage_line(usage):
    parts = [f"stage {s['stage']}: busy {s['busy_pct']:.1f}%, send {s['send_pct']:.1f}%, "
             f"bubble {s['bubble_pct']:.1f}%" for s in usage.get("stages", [])]
    return "; ".join(parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("-o", "--output", help="PNG path (default: the trace path with .png)")
    ap.add_argument("--from-ms", type=float, help="start of the window to draw")
    ap.add_argument("--to-ms", type=float, help="end of the window to draw")
    ap.add_argument("--middle-ms", type=float, help="draw only this many ms around the middle (steady state)")
    ap.add_argument("--title", default="conveyor pipeline timeline")
    args = ap.parse_args()
    names, spans, usage = load(args.trace)
    out = args.output or (args.trace.rsplit(".", 1)[0] + ".png")

    ranks = sorted(spans)
    fig, ax = plt.subplots(figsize=(14, 1.0 + 0.6 * len(ranks)))
    lo, hi = args.from_ms, args.to_ms
    if args.middle_ms:
        end = max(b + d for v in spans.values() for b, d, _ in v)
        lo, hi = end / 2 - args.middle_ms / 2, end / 2 + args.middle_ms / 2
    for row, rank in enumerate(ranks):
        by_phase = {}
        for begin, dur, phase in spans[rank]:
            if (lo is not None and begin + dur < lo) or (hi is not None and begin > hi):
                continue
            by_phase.setdefault(phase, []).append((begin, dur))
        for phase, bars in by_phase.items():
            ax.broken_barh(bars, (row - 0.4, 0.8), facecolors=PHASE_COLORS.get(phase, "#756bb1"), linewidth=0)
    ax.set_yticks(range(len(ranks)))
    ax.set_yticklabels([names.get(r, f"rank {r}") for r in ranks])
    ax.invert_yaxis()
    ax.set_xlabel("time (ms)")
    if lo is not None or hi is not None:
        ax.set_xlim(left=lo, right=hi)
    ax.legend(handles=[Patch(color=c, label=p) for p, c in PHASE_COLORS.items()], loc="center left",
              bbox_to_anchor=(1.005, 0.5), fontsize=8)
    line = usage_line(usage)
    ax.set_title(args.title + ("\n" + line if line else ""), fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"wrote {out} ({sum(len(v) for v in spans.values())} spans, {len(ranks)} ranks)")


if __name__ == "__main__":
    main()
