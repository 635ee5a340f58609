#!/usr/bin/env python3
"""Re-simulates a benchmarks/sim_cpu.py run from its own doctor with device.sharing.slice_us removed (the
model before the TP turns: plain processor sharing) or set, and with --no-holds without the measured holds
of TP co-runners (the hold is min(turn, slice)), and prints measured vs predicted per layout.

    resim.py RUN_DIR (--slice-us US | --no-slice) [--no-holds] [--layouts 2x2,3x1] [--tag ps]

Writes RUN_DIR/plan_ppP_tpT_TAG.json (and doctor_TAG.json, the doctor it read). Nothing is fitted."""
import argparse
import json
import os
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[".."] * 5))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--slice-us", type=float)
    g.add_argument("--no-slice", action="store_true")
    ap.add_argument("--no-holds", action="store_true", help="drop device.sharing.holds: min(turn, slice)")
    ap.add_argument("--layouts", default="1x1,2x1,3x1,4x1,2x2")
    ap.add_argument("--tag", default="ps")
    ap.add_argument("--conveyor", default=os.path.join(ROOT, "build/conveyor"))
    a = ap.parse_args()
    d = json.load(open(os.path.join(a.run, "doctor.json")))
    if a.no_slice:
        d["device"]["sharing"].pop("slice_us", None)
        d["device"]["sharing"].pop("holds", None)
    else:
        d["device"]["sharing"]["slice_us"] = a.slice_us
    if a.no_holds:
        d["device"]["sharing"].pop("holds", None)
    doctor = os.path.abspath(os.path.join(a.run, f"doctor_{a.tag}.json"))
    json.dump(d, open(doctor, "w"), indent=1)
    cluster = os.path.abspath(os.path.join(a.run, f"cluster_{a.tag}.yaml"))
    open(cluster, "w").write(open(os.path.join(a.run, "cluster.yaml")).read().replace("doctor.json", os.path.basename(doctor)))
    for pp, tp in (tuple(int(x) for x in l.split("x")) for l in a.layouts.split(",")):
        b = json.load(open(os.path.join(a.run, f"bench_pp{pp}_tp{tp}.json")))
        out = os.path.join(a.run, f"plan_pp{pp}_tp{tp}_{a.tag}.json")
        subprocess.run([a.conveyor, "plan", "--cluster", cluster, "-pp", str(pp), "-tp", str(tp), "--workload",
                        "prompts=48,input=16,output=32", "--output-json", out, "--set",
                        f"model.config={ROOT}/configs/models/cpu-sim-16l.yaml", "--set", "runtime.backend=cpu", "--set",
                        "cache.cpu_kv_cache_space=0.25", "--max-num-seqs", "16", "--set",
                        f"parallel.device_profile={doctor}"], check=True, stdout=subprocess.DEVNULL)
        s = json.load(open(out))["layouts"][0]
        m = [x["bubble_pct"] for x in b["pipeline_usage"]["stages"]]
        p = [100 * x["bubble"] for x in s["stages"]]
        fmt = lambda v: " / ".join(f"{x:.1f}" for x in v)
        print(f"pp {pp} x tp {tp}: {b['output_tokens_per_second']:.1f} tok/s measured, {s['output_tokens_per_s']:.1f} "
              f"predicted; bubble % {fmt(m)} vs {fmt(p)}; largest gap {max(abs(x - y) for x, y in zip(m, p)):.1f}")


if __name__ == "__main__":
    main()
