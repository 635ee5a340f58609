#!/usr/bin/env python3
"""Re-simulate committed benchmarks/sim_cpu.py runs with the current build (issue 18, 4(b)):

    benchmarks/resim_cpu.py [--conveyor build/conveyor] [--quantum-us US] RUN_DIR...

Each RUN_DIR holds a sim_cpu.py run's sim_cpu.json (its workload and measured rows) and doctor.json. For every
row, `conveyor plan` runs again from that doctor JSON alone (sim_cpu.py's simulate) and the line shows predicted /
measured output tok/s and, per stage, the measured bubble minus the predicted one (points); `*` marks a row
outside sim_cpu.py's bounds. A simulator change is checked against every run measured so far in seconds.
--quantum-us gives doctor JSONs made before doctor's quantum probe (device.sharing.quantum_us) that slice, so that
their runs are simulated with the run queues' turns too (the probe measured 3,840-4,000 us on this machine).
--what-if edits every doctor JSON before simulating, to ask how a rule or a measurement moves the rows (repeatable):
ring_above=F scales the ring probe's speeds at k > cpus, ring_below=sharing takes the sharing probe's speeds at
k <= cpus instead of the ring's, ring=ideal gives a rank that holds a CPU its speed alone (1 up to the CPUs, cpus / k
beyond), ring_k1=drop leaves k = 1 unmeasured (doctor's rule since 2026-12-07: a reading counts from 16 calls,
and k = 1 meets ~10 a ring), busy_hops=F scales the busy hop samples, quantum_us=US sets the slice. The last line
counts the rows within the bounds per layout."""
import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sim_cpu  # noqa: E402


def what_if(sharing, edits):
    """Applies --what-if edits (name, value) to a doctor JSON's device.sharing in place."""
    cpus, alone = sharing["cpus"], sharing["speed"]
    rings = [b["speed"] for b in sharing.get("pipeline_speed", [])]
    rings += [b["speed"] for b in sharing.get("ring", {}).get("by_ranks", [])]
    for name, value in edits:
        if name == "ring_above":
            for v in rings:
                v[cpus:] = [min(1.5, x * float(value)) for x in v[cpus:]]
        elif name == "ring_below" and value == "sharing":
            for v in rings:
                v[:cpus] = alone[:min(cpus, len(v))]
        elif name == "ring" and value == "ideal":  # a rank that holds a CPU runs at its speed alone
            for v in rings:
                v[:] = [1.0 if k <= cpus else cpus / k for k in range(1, len(v) + 1)]
        elif name == "ring_k1" and value == "drop":  # doctor's rule since 2026-12-07: k = 1 has too few calls
            for v in rings:
                v[0] = 0.0
        elif name == "busy_hops":
            sharing["busy_hop_samples_us"] = [x * float(value) for x in sharing.get("busy_hop_samples_us", [])]
            sharing["busy_hop_us"] = sharing.get("busy_hop_us", 0) * float(value)
        elif name == "quantum_us":
            sharing["quantum_us"] = float(value)
        else:
            sys.exit(f"resim_cpu.py: unknown --what-if {name}={value}")


def resimulate(conveyor, run_dir, tmp, quantum_us=None, edits=()):
    run = json.load(open(os.path.join(run_dir, "sim_cpu.json")))
    doctor = os.path.abspath(os.path.join(run_dir, "doctor.json"))
    d = json.load(open(doctor))
    sharing = d["device"]["sharing"]
    if (quantum_us is not None and "quantum_us" not in sharing) or edits:
        if quantum_us is not None:
            sharing.setdefault("quantum_us", quantum_us)
        what_if(sharing, edits)
        doctor = os.path.join(tmp, "doctor.json")
        with open(doctor, "w") as f:
            json.dump(d, f)
    cluster = os.path.join(tmp, "cluster.yaml")
    sim_cpu.write_cluster(cluster, doctor)
    cells, outside, held = [], 0, {}
    for row in run["rows"]:
        pp, tp = row["pipeline"], row["tensor"]
        layout = sim_cpu.simulate(conveyor, tmp, run["workload"], doctor, cluster, pp, tp)
        ratio = layout["output_tokens_per_s"] / row["measured_tok_s"]
        diffs = [m - 100 * s["bubble"] for m, s in zip(row["measured_bubble_pct"], layout["stages"])]
        ok = abs(ratio - 1) <= sim_cpu.THROUGHPUT_TOL and all(abs(d) <= sim_cpu.BUBBLE_TOL for d in diffs)
        outside += not ok
        held[f"pp{pp}x{tp}"] = ok
        cells.append(f"pp{pp}x{tp} {ratio:.2f} [{' '.join(f'{d:+.1f}' for d in diffs)}]{'' if ok else '*'}")
    return cells, outside, len(run["rows"]), held


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conveyor", default=os.path.join(sim_cpu.ROOT, "build/conveyor"))
    ap.add_argument("--quantum-us", type=float, help="the slice for doctor JSONs without quantum_us")
    ap.add_argument("--what-if", action="append", default=[], metavar="NAME=VALUE",
                    help="ring_above=F, ring_below=sharing, ring=ideal, busy_hops=F or quantum_us=US")
    ap.add_argument("runs", nargs="+")
    args = ap.parse_args()
    edits = [tuple(e.split("=", 1)) for e in args.what_if]
    total = bad = 0
    held = {}
    with tempfile.TemporaryDirectory() as tmp:
        for d in args.runs:
            cells, outside, rows, ok = resimulate(args.conveyor, d, tmp, args.quantum_us, edits)
            total, bad = total + rows, bad + outside
            for k, v in ok.items():
                held.setdefault(k, []).append(v)
            print(f"{os.path.relpath(os.path.abspath(d), sim_cpu.ROOT)}: " + " | ".join(cells))
    print(f"rows outside the bounds: {bad} of {total}; within, by layout: " +
          ", ".join(f"{k} {sum(v)}/{len(v)}" for k, v in held.items()))


if __name__ == "__main__":
    main()
