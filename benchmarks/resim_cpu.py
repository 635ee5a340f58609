#!/usr/bin/env python3
"""Re-simulate committed benchmarks/sim_cpu.py runs with the current build (issue 18, 4(b)):

    benchmarks/resim_cpu.py [--conveyor build/conveyor] [--quantum-us US] RUN_DIR...

Each RUN_DIR holds a sim_cpu.py run's sim_cpu.json (its workload and measured rows) and doctor.json. For every
row, `conveyor plan` runs again from that doctor JSON alone (sim_cpu.py's simulate) and the line shows predicted /
measured output tok/s and, per stage, the measured bubble minus the predicted one (points); `*` marks a row
outside sim_cpu.py's bounds. A simulator change is checked against every run measured so far in seconds.
--quantum-us gives doctor JSONs made before doctor's quantum probe (device.sharing.quantum_us) that slice, so that
their runs are simulated with the run queues' turns too (the probe measured 3,840-4,000 us on this machine)."""
import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sim_cpu  # noqa: E402


def resimulate(conveyor, run_dir, tmp, quantum_us=None):
    run = json.load(open(os.path.join(run_dir, "sim_cpu.json")))
    doctor = os.path.abspath(os.path.join(run_dir, "doctor.json"))
    d = json.load(open(doctor))
    if quantum_us is not None and "quantum_us" not in d["device"]["sharing"]:
        d["device"]["sharing"]["quantum_us"] = quantum_us
        doctor = os.path.join(tmp, "doctor.json")
        with open(doctor, "w") as f:
            json.dump(d, f)
    cluster = os.path.join(tmp, "cluster.yaml")
    sim_cpu.write_cluster(cluster, doctor)
    cells, outside = [], 0
    for row in run["rows"]:
        pp, tp = row["pipeline"], row["tensor"]
        layout = sim_cpu.simulate(conveyor, tmp, run["workload"], doctor, cluster, pp, tp)
        ratio = layout["output_tokens_per_s"] / row["measured_tok_s"]
        diffs = [m - 100 * s["bubble"] for m, s in zip(row["measured_bubble_pct"], layout["stages"])]
        ok = abs(ratio - 1) <= sim_cpu.THROUGHPUT_TOL and all(abs(d) <= sim_cpu.BUBBLE_TOL for d in diffs)
        outside += not ok
        cells.append(f"pp{pp}x{tp} {ratio:.2f} [{' '.join(f'{d:+.1f}' for d in diffs)}]{'' if ok else '*'}")
    return cells, outside, len(run["rows"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conveyor", default=os.path.join(sim_cpu.ROOT, "build/conveyor"))
    ap.add_argument("--quantum-us", type=float, help="the slice for doctor JSONs without quantum_us")
    ap.add_argument("runs", nargs="+")
    args = ap.parse_args()
    total = bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for d in args.runs:
            cells, outside, rows = resimulate(args.conveyor, d, tmp, args.quantum_us)
            total, bad = total + rows, bad + outside
            print(f"{os.path.relpath(os.path.abspath(d), sim_cpu.ROOT)}: " + " | ".join(cells))
    print(f"rows outside the bounds: {bad} of {total}")


if __name__ == "__main__":
    main()
