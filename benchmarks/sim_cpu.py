#!/usr/bin/env python3
"""Simulator vs CPU multi-rank runs (issue 18, item 4(b)), one command:

    benchmarks/sim_cpu.py [--conveyor build/conveyor] [--out benchmarks/results/cpu] [--size full|small] [--check]

On this machine: `conveyor doctor` on the CPU backend under mpirun (4 ranks as pp 2 x tp 2, one CPU thread
each: this host's kernel speeds, how ranks share its cores, how long a TP pair's all-reduce round takes beside
ranks that compute without pause, how well a CPU's run queue keeps its ranks, the MPI links) writes OUT/doctor.json; a cluster
file OUT/cluster.yaml describes the host from it (`gpu: {preset: cpu, doctor_json: doctor.json}`). Then
for pp 1, 2, 3, 4 and pp 2 x tp 2: `conveyor bench throughput` on the CPU backend (dummy weights of a small
model shape, the split planned from the same doctor JSON) and `conveyor plan --cluster` for the same
layout and workload. The table compares output tok/s (within 20%) and every stage's bubble (within 5
points), and checks that the simulator took the run's split and made the run's scheduler plans. Writes
OUT/sim_cpu.json and OUT/sim_cpu.md, and per layout the run's --trace (trace_ppP_tpT.json) beside the
simulated one (sim_trace_ppP_tpT.json, `conveyor plan --trace`) for benchmarks/plot_trace.py or Perfetto.
--check: exit 1 when a row is outside the bounds (after --retries
reruns of that row, each with a fresh doctor: timings move with the host's load, the schedule does not).
--check-gross (the CI test): the schedule exactly and the timings within gross bounds, at every layout.
Nothing is fitted to a run: the simulator sees only the doctor JSON."""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYOUTS = [(1, 1), (2, 1), (3, 1), (4, 1), (2, 2)]
# Workloads: every request at once, exact lengths (vLLM's random dataset at range ratio 0).
SIZES = {
    "full": {"model": "configs/models/cpu-sim-16l.yaml", "prompts": 48, "input": 16, "output": 32, "max_num_seqs": 16},
    "small": {"model": "configs/models/cpu-sim-16l.yaml", "prompts": 16, "input": 8, "output": 16, "max_num_seqs": 8},
}
THROUGHPUT_TOL = 0.20  # relative
BUBBLE_TOL = 5.0       # points
# --check-gross: what a defect in the simulator breaks and the host's noise does not. On the 2-vCPU VMs the same
# pp 1 run measured 65.6 and 108.9 tok/s minutes apart, and five doctors in one CI run predicted pp 2 x tp 2 at
# x1.26-1.79 and x0.74 of its runs (benchmarks/results/cpu/2026-12-07-r20); a simulator that forgot a cost or
# a hop would be off by more.
GROSS_RATIO = 2.0      # predicted / measured within [1 / 2, 2]
GROSS_BUBBLE = 15.0    # points
KV_GIB = 0.25          # cache.cpu_kv_cache_space per rank: room for the workload, little memory


def mpirun(np):
    return ["mpirun", "--oversubscribe", "-np", str(np), "-x", "OMPI_MCA_btl_vader_single_copy_mechanism=none"]


def run(cmd, log):
    with open(log, "w") as f:
        f.write(" ".join(cmd) + "\n")
        f.flush()
        r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {r.returncode}; see {log}:\n" + open(log).read()[-3000:])


def doctor(conveyor, out):
    path = os.path.join(out, "doctor.json")
    run(mpirun(4) + [conveyor, "doctor", "-pp", "2", "-tp", "2", "--set", "runtime.backend=cpu", "--set",
                     "runtime.cpu_threads=1", "--bytes", "16M", "--iters", "5", "--output-json", path],
        os.path.join(out, "doctor.log"))
    cluster = os.path.join(out, "cluster.yaml")
    write_cluster(cluster, "doctor.json")
    return path, cluster


def write_cluster(path, doctor_json):
    """The cluster file of this host as the simulator sees it: every speed from doctor_json (relative to path)."""
    with open(path, "w") as f:
        f.write("# This host as the simulator sees it: every speed from doctor.json (benchmarks/sim_cpu.py).\n"
                "name: this CPU host (MPI ranks of the CPU backend, 1 thread each)\nnodes: 1\ngpus_per_node: 4\n"
                f"gpu:\n  preset: cpu\n  doctor_json: {doctor_json}\nintra_node: doctor\nprecision: fp32\n")


def common(size, doctor_json):
    model = os.path.join(ROOT, size["model"])
    return ["--set", f"model.config={model}", "--set", "runtime.backend=cpu", "--set", f"cache.cpu_kv_cache_space={KV_GIB}",
            "--max-num-seqs", str(size["max_num_seqs"]), "--set", f"parallel.device_profile={doctor_json}"]


def bench(conveyor, out, size, doctor_json, pp, tp):
    path = os.path.join(out, f"bench_pp{pp}_tp{tp}.json")
    run(mpirun(pp * tp) + [conveyor, "bench", "throughput", "--load-format", "dummy", "-pp", str(pp), "-tp", str(tp),
                           "--set", "runtime.cpu_threads=1", "--input-len", str(size["input"]), "--output-len",
                           str(size["output"]), "--num-prompts", str(size["prompts"]), "--output-json", path,
                           "--trace", os.path.join(out, f"trace_pp{pp}_tp{tp}.json")]
        + common(size, doctor_json), os.path.join(out, f"bench_pp{pp}_tp{tp}.log"))
    return json.load(open(path))


def simulate(conveyor, out, size, doctor_json, cluster, pp, tp):
    path = os.path.join(out, f"plan_pp{pp}_tp{tp}.json")
    workload = f"prompts={size['prompts']},input={size['input']},output={size['output']}"
    run([conveyor, "plan", "--cluster", cluster, "-pp", str(pp), "-tp", str(tp), "--workload", workload,
         "--output-json", path, "--trace", os.path.join(out, f"sim_trace_pp{pp}_tp{tp}.json")] + common(size, doctor_json),
        os.path.join(out, f"plan_pp{pp}_tp{tp}.log"))
    return json.load(open(path))["layouts"][0]


def compare(pp, tp, b, s):
    """One row: measured vs simulated, and what is outside the bounds."""
    got, want = s["output_tokens_per_s"], b["output_tokens_per_second"]
    measured = [st["bubble_pct"] for st in b["pipeline_usage"]["stages"]]
    predicted = [100 * st["bubble"] for st in s["stages"]]
    split_run = b["layout"]["partition"]
    split_sim = [st["layers"][1] - st["layers"][0] for st in s["stages"]]
    row = {"pipeline": pp, "tensor": tp, "micro_batches": b["layout"]["micro_batches"], "partition": split_run,
           "measured_tok_s": want, "predicted_tok_s": got, "ratio": got / want, "measured_bubble_pct": measured,
           "predicted_bubble_pct": predicted, "plans": [b["kv_cache"]["plans"], s["plans"]],
           "elapsed_s": [b["elapsed_time"], s["elapsed_s"]]}
    errors, exact = [], []
    if abs(got / want - 1) > THROUGHPUT_TOL:
        errors.append(f"throughput {got:.1f} predicted vs {want:.1f} measured ({100 * (got / want - 1):+.0f}%)")
    for i, (m, p) in enumerate(zip(measured, predicted)):
        if abs(m - p) > BUBBLE_TOL:
            errors.append(f"stage {i} bubble {p:.1f}% predicted vs {m:.1f}% measured")
    gross = []
    if not 1 / GROSS_RATIO <= got / want <= GROSS_RATIO:
        gross.append(f"throughput {got:.1f} predicted vs {want:.1f} measured (x{got / want:.2f})")
    gross += [f"stage {i} bubble {p:.1f}% predicted vs {m:.1f}% measured"
              for i, (m, p) in enumerate(zip(measured, predicted)) if abs(m - p) > GROSS_BUBBLE]
    if split_run != split_sim:
        exact.append(f"split {split_sim} simulated, {split_run} run")
    if b["kv_cache"]["plans"] != s["plans"]:
        exact.append(f"{s['plans']} plans simulated, {b['kv_cache']['plans']} run")
    row["errors"] = errors + exact
    row["schedule_errors"] = exact  # independent of the host's load: always checked
    row["gross_errors"] = gross + exact
    return row


def failing(row, bounded, gross=False):
    """Errors --check counts: the schedule's always, the timing bounds' where the layout is bounded (with
    --check-gross, the gross bounds' instead, at every layout)."""
    if gross:
        return row["gross_errors"]
    return row["errors"] if (row["pipeline"], row["tensor"]) in bounded else row["schedule_errors"]


def markdown(rows, cmd):
    lines = ["| layout | M | split | measured tok/s | predicted | ratio | bubble % measured | bubble % predicted | "
             "plans run / sim | within bounds |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        fmt = lambda v: " / ".join(f"{x:.1f}" for x in v)
        lines.append(f"| pp {r['pipeline']} x tp {r['tensor']} | {r['micro_batches']} | {'+'.join(map(str, r['partition']))} "
                     f"| {r['measured_tok_s']:.1f} | {r['predicted_tok_s']:.1f} | {r['ratio']:.2f} | "
                     f"{fmt(r['measured_bubble_pct'])} | {fmt(r['predicted_bubble_pct'])} | {r['plans'][0]} / {r['plans'][1]} "
                     f"| {'yes' if not r['errors'] else 'NO: ' + '; '.join(r['errors'])} |")
    return "\n".join(lines) + f"\n\nCommand: `{cmd}`\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conveyor", default=os.path.join(ROOT, "build/conveyor"))
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks/results/cpu"))
    ap.add_argument("--size", choices=sorted(SIZES), default="full")
    ap.add_argument("--check", action="store_true", help="exit 1 when a row is outside the bounds")
    ap.add_argument("--check-gross", action="store_true",
                    help="exit 1 when a row's schedule differs or its timing is grossly off (predicted / measured "
                         "outside [1/2, 2], a bubble off by more than 15 points), at every layout; the 20%% / 5-point "
                         "bounds are reported (the CI test: timings on a shared 2-vCPU VM move by more than them)")
    ap.add_argument("--retries", type=int, default=1, help="reruns (fresh doctor + run) of a row outside the bounds")
    ap.add_argument("--bounded", default="",
                    help="PPxTP,... or none: the layouts whose timing bounds --check enforces (default: all); the "
                         "split and the scheduler plans are checked for every layout")
    args = ap.parse_args()
    bounded = (set(LAYOUTS) if not args.bounded else set() if args.bounded == "none"
               else {tuple(int(x) for x in l.split("x")) for l in args.bounded.split(",")})
    os.makedirs(args.out, exist_ok=True)
    size = SIZES[args.size]
    t0 = time.time()
    doctor_json, cluster = doctor(args.conveyor, args.out)
    rows = []
    for pp, tp in LAYOUTS:
        for attempt in range(args.retries + 1):
            if attempt > 0:
                why = row["gross_errors"] if args.check_gross else row["errors"]
                print(f"pp {pp} x tp {tp}: outside the bounds ({'; '.join(why)}); rerunning with a fresh doctor")
                doctor_json, cluster = doctor(args.conveyor, args.out)
            b = bench(args.conveyor, args.out, size, doctor_json, pp, tp)
            s = simulate(args.conveyor, args.out, size, doctor_json, cluster, pp, tp)
            row = compare(pp, tp, b, s)
            row["attempts"] = attempt + 1
            if not failing(row, bounded, args.check_gross):
                break
        rows.append(row)
        print(f"pp {pp} x tp {tp}: {row['measured_tok_s']:.1f} tok/s measured, {row['predicted_tok_s']:.1f} predicted; "
              f"bubble % {[round(x, 1) for x in row['measured_bubble_pct']]} vs "
              f"{[round(x, 1) for x in row['predicted_bubble_pct']]}{'' if not row['errors'] else '  OUTSIDE: ' + '; '.join(row['errors'])}"
              f"{'' if (pp, tp) in bounded and not args.check_gross else ' (20% / 5-point bounds reported)'}",
              flush=True)
    cmd = "benchmarks/sim_cpu.py " + " ".join(sys.argv[1:])
    result = {"size": args.size, "workload": size, "bounds": {"throughput": THROUGHPUT_TOL, "bubble_points": BUBBLE_TOL},
              "gross_bounds": {"ratio": GROSS_RATIO, "bubble_points": GROSS_BUBBLE},
              "doctor": os.path.relpath(doctor_json, args.out), "rows": rows, "command": cmd.strip(),
              "wall_s": time.time() - t0}
    json.dump(result, open(os.path.join(args.out, "sim_cpu.json"), "w"), indent=2)
    table = markdown(rows, cmd.strip())
    open(os.path.join(args.out, "sim_cpu.md"), "w").write(table)
    print(table)
    bad = [r for r in rows if failing(r, bounded, args.check_gross)]
    if (args.check or args.check_gross) and bad:
        sys.exit(f"FAIL: {len(bad)} of {len(rows)} rows outside the bounds")


if __name__ == "__main__":
    main()
