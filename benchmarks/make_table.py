#!/usr/bin/env python3
"""Markdown table of a suite's results: ours, the predicted, the roofline and the peer, side by side.

Reads DIR/<run>.<what>.json, where <what> is
  conveyor      `conveyor bench ... --output-json` (throughput or latency mode)
  predicted     `conveyor plan --compare ... --output-json` (the row of the run's layout is used)
  hf_default    benchmarks/peers/hf_generate.py --cache default
  hf_static     benchmarks/peers/hf_generate.py --cache static
Runs without a conveyor result are listed with what they have.

    python3 benchmarks/make_table.py benchmarks/results/nvidia-h200 -o benchmarks/results/nvidia-h200/table.md \
      --png benchmarks/results/nvidia-h200/results.png
--png draws the same numbers as grouped bars (output tokens/s, log scale) with matplotlib.
"""
import argparse
import glob
import json
import os
import sys

KINDS = ("conveyor", "predicted", "hf_default", "hf_static")


def load_runs(directory):
    runs = {}
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        parts = os.path.basename(path)[: -len(".json")].rsplit(".", 1)
        if len(parts) != 2 or parts[1] not in KINDS:
            continue
        with open(path) as f:
            runs.setdefault(parts[0], {})[parts[1]] = json.load(f)
    return runs


def fmt(x, digits=0):
    return "-" if x is None else f"{x:,.{digits}f}"


def ratio(a, b):
    return "-" if not a or not b else f"{a / b:.2f}x"


def peer_rate(peer):
    if peer is None:
        return None, "-"
    if peer.get("oom"):
        return None, "OOM"
    rate = peer["output_tokens_per_second"]
    return rate, f"{rate:,.1f} (b{peer['batch']})"


def row(name, r):
    ours = r.get("conveyor")
    ours_rate = ours["output_tokens_per_second"] if ours else None
    layout, per_gpu, roof, share, bubble, workload = "-", None, None, None, None, "-"
    if ours:
        lay = ours["layout"]
        layout = f"pp={lay['pipeline']} tp={lay['tensor']}"
        per_gpu = ours["output_tokens_per_second_per_gpu"]
        roof = ours["roofline"]["output_tokens_per_s"]
        share = 100 * ours["roofline"]["share"]
        stages = (ours.get("pipeline_usage") or {}).get("stages", [])
        bubble = max((s["bubble_pct"] for s in stages), default=None)
        w = ours["workload"]
        size = f"b{ours['batch_size']}" if ours["mode"] == "latency" else f"{ours['num_requests']} prompts"
        workload = f"{ours['mode']} {size}, {w['input_len']}/{w['output_len']}"
    predicted, basis = None, ""
    if ours and "predicted" in r:
        for p in r["predicted"]["layouts"]:
            if (p["pipeline"], p["tensor"]) == (ours["layout"]["pipeline"], ours["layout"]["tensor"]):
                predicted = p["output_tokens_per_s"]
        # older predictions carry no device_model: they were the ideal roofline
        basis = "" if r["predicted"].get("device_model", {}).get("measured") else ", ideal"
    err = "-" if not predicted or not ours_rate else f"{100 * (predicted - ours_rate) / ours_rate:+.0f}%{basis}"
    hf_d, hf_d_text = peer_rate(r.get("hf_default"))
    hf_s, hf_s_text = peer_rate(r.get("hf_static"))
    return (f"| {name} | {workload} | {layout} | {fmt(ours_rate, 1)} | {fmt(per_gpu, 1)} | {fmt(predicted)} ({err}) | "
            f"{fmt(roof)} | {fmt(share, 1)}% | {fmt(bubble, 1)} | {hf_d_text} | {hf_s_text} | "
            f"{ratio(ours_rate, hf_d)} | {ratio(ours_rate, hf_s)} |")


def plot(runs, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = [("conveyor", "#1f77b4"), ("predicted", "#aec7e8"), ("roofline", "#7f7f7f"),
              ("HF default", "#ff7f0e"), ("HF static", "#ffbb78")]
    names = sorted(runs)
    fig, ax = plt.subplots(figsize=(2.6 * len(names) + 2, 4.5))
    width = 0.8 / len(series)
    for i, name in enumerate(names):
        r = runs[name]
        ours = r.get("conveyor")
        pred = None
        if ours and "predicted" in r:
            for p in r["predicted"]["layouts"]:
                if (p["pipeline"], p["tensor"]) == (ours["layout"]["pipeline"], ours["layout"]["tensor"]):
                    pred = p["output_tokens_per_s"]
        values = [ours["output_tokens_per_second"] if ours else None, pred,
                  ours["roofline"]["output_tokens_per_s"] if ours else None,
                  peer_rate(r.get("hf_default"))[0], peer_rate(r.get("hf_static"))[0]]
        for j, ((label, color), v) in enumerate(zip(series, values)):
            if v:
                x = i + (j - (len(series) - 1) / 2) * width
                ax.bar(x, v, width, color=color, label=label if i == 0 or label not in ax.get_legend_handles_labels()[1] else None)
                ax.text(x, v, f"{v:,.0f}", ha="center", va="bottom", fontsize=7, rotation=90)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names)
    ax.set_yscale("log")
    ax.set_ylabel("output tokens/s")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title("conveyor vs prediction, roofline and HF transformers")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("directory")
    ap.add_argument("-o", "--output", help="write the markdown here too")
    ap.add_argument("--png", help="also draw the numbers as bars into this PNG")
    args = ap.parse_args()
    runs = load_runs(args.directory)
    if not runs:
        sys.exit(f"make_table: no <run>.<{'|'.join(KINDS)}>.json files in {args.directory}")
    lines = [
        "| run | workload | layout | ours out tok/s | per GPU | predicted (err) | roofline tok/s | of roofline |"
        " max bubble % | HF default | HF static | vs HF default | vs HF static |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [row(name, r) for name, r in sorted(runs.items())]
    lines += ["", "Output tokens/s. Roofline: the ideal bf16 time of the same requests over all GPUs' peaks "
              "(4.28 TB/s, 810 TFLOP/s; docs/bench.md); predicted: `conveyor plan --compare` for the run's layout "
              "(err = predicted vs measured), from `conveyor doctor`'s measured kernel speeds, or marked `ideal` "
              "when made without them (docs/bench.md, \"The prediction model\"). HF: transformers `generate`, random weights, batch in parentheses."]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
    if args.png:
        plot(runs, args.png)


if __name__ == "__main__":
    main()
