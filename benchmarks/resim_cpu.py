#!/usr/bin/env python3
"""Re-simulate committed benchmarks/sim_cpu.py runs with the current build (issue 18, 4(b)):

    benchmarks/resim_cpu.py [--conveyor build/conveyor] RUN_DIR...

Each RUN_DIR holds a sim_cpu.py run's sim_cpu.json (its workload and measured rows) and doctor.json. For every
row, `conveyor plan` runs again from that doctor JSON alone and the line shows predicted / measured output tok/s
and, per stage, the measured bubble minus the predicted one (points); `*` marks a row outside the bounds (20%,
5 points). A simulator change is checked against every run measured so far in seconds, without rerunning them."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def resimulate(conveyor, run_dir, tmp):
    run = json.load(open(os.path.join(run_dir, "sim_cpu.json")))
    w, doctor = run["workload"], os.path.abspath(os.path.join(run_dir, "doctor.json"))
    cluster, out = os.path.join(tmp, "cluster.yaml"), os.path.join(tmp, "plan.json")
    with open(cluster, "w") as f:
        f.write(f"name: {run_dir}\nnodes: 1\ngpus_per_node: 4\ngpu:\n  preset: cpu\n  doctor_json: {doctor}\n"
                "intra_node: doctor\nprecision: fp32\n")
    cells, outside = [], 0
    for row in run["rows"]:
        pp, tp = row["pipeline"], row["tensor"]
        subprocess.run([conveyor, "plan", "--cluster", cluster, "-pp", str(pp), "-tp", str(tp), "--workload",
                        f"prompts={w['prompts']},input={w['input']},output={w['output']}", "--output-json", out,
                        "--set", f"model.config={os.path.join(ROOT, w['model'])}", "--set", "runtime.backend=cpu",
                        "--set", "cache.cpu_kv_cache_space=0.25", "--max-num-seqs", str(w["max_num_seqs"]),
                        "--set", f"parallel.device_profile={doctor}"], check=True, capture_output=True)
        layout = json.load(open(out))["layouts"][0]
        ratio = layout["output_tokens_per_s"] / row["measured_tok_s"]
        diffs = [m - 100 * s["bubble"] for m, s in zip(row["measured_bubble_pct"], layout["stages"])]
        ok = abs(ratio - 1) <= 0.20 and all(abs(d) <= 5.0 for d in diffs)
        outside += not ok
        cells.append(f"pp{pp}x{tp} {ratio:.2f} [{' '.join(f'{d:+.1f}' for d in diffs)}]{'' if ok else '*'}")
    return cells, outside, len(run["rows"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conveyor", default=os.path.join(ROOT, "build/conveyor"))
    ap.add_argument("runs", nargs="+")
    args = ap.parse_args()
    total = bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for d in args.runs:
            cells, outside, rows = resimulate(args.conveyor, d, tmp)
            total, bad = total + rows, bad + outside
            print(f"{os.path.relpath(d, ROOT) if d.startswith(ROOT) else d}: " + " | ".join(cells))
    print(f"rows outside the bounds: {bad} of {total}")
    sys.exit(0)


if __name__ == "__main__":
    main()
