#!/usr/bin/env python3
"""Re-simulates a benchmarks/sim_cpu.py run from its own doctor, with device.sharing.stickiness as doctor
measured it, removed (--no-sticky: the model before the per-CPU run queues, processor sharing for TP-less
ranks) or set (--sticky 3:1,4:0.23: another doctor's values, for runs measured before the probe existed),
and prints measured vs predicted per layout (one JSON line per layout with --json).

    resim.py RUN_DIR [--no-sticky | --sticky RANKS:VALUE,...] [--drop KEY,...] [--layouts 3x1,4x1] [--tag TAG] [--json]

--drop removes other device.sharing keys (--drop pipeline_speed: the model before pp4_path's ring probe);
--graft KEY=FILE sets one from a JSON file (another doctor's ring probe, for runs measured before it existed).

Writes RUN_DIR/plan_ppP_tpT_TAG.json (and doctor_TAG.json, the doctor it read), or the same under --out."""
import argparse
import json
import os
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[".."] * 5))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--sticky")
    g.add_argument("--no-sticky", action="store_true")
    ap.add_argument("--drop", default="", help="device.sharing keys to remove, comma-separated")
    ap.add_argument("--graft", action="append", default=[], help="KEY=FILE: device.sharing[KEY] from a JSON file")
    ap.add_argument("--layouts", default="1x1,2x1,3x1,4x1,2x2")
    ap.add_argument("--tag", default="rq")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--out", help="write the doctor, cluster and plans here instead of RUN_DIR (runs of other folders)")
    ap.add_argument("--conveyor", default=os.path.join(ROOT, "build/conveyor"))
    a = ap.parse_args()
    d = json.load(open(os.path.join(a.run, "doctor.json")))
    sh = d["device"]["sharing"]
    if a.no_sticky:
        sh.pop("stickiness", None)
    elif a.sticky:
        sh["stickiness"] = [{"ranks": int(x.split(":")[0]), "value": float(x.split(":")[1])} for x in a.sticky.split(",")]
    for key in filter(None, a.drop.split(",")):
        sh.pop(key, None)
    for g in a.graft:
        key, path = g.split("=", 1)
        sh[key] = json.load(open(path))
    out_dir = a.out or a.run
    os.makedirs(out_dir, exist_ok=True)
    doctor = os.path.abspath(os.path.join(out_dir, f"doctor_{a.tag}.json"))
    json.dump(d, open(doctor, "w"), indent=1)
    cluster = os.path.abspath(os.path.join(out_dir, f"cluster_{a.tag}.yaml"))
    open(cluster, "w").write(open(os.path.join(a.run, "cluster.yaml")).read().replace("doctor.json", os.path.basename(doctor)))
    for pp, tp in (tuple(int(x) for x in l.split("x")) for l in a.layouts.split(",")):
        b = json.load(open(os.path.join(a.run, f"bench_pp{pp}_tp{tp}.json")))
        out = os.path.join(out_dir, f"plan_pp{pp}_tp{tp}_{a.tag}.json")
        subprocess.run([a.conveyor, "plan", "--cluster", cluster, "-pp", str(pp), "-tp", str(tp), "--workload",
                        "prompts=48,input=16,output=32", "--output-json", out, "--set",
                        f"model.config={ROOT}/configs/models/cpu-sim-16l.yaml", "--set", "runtime.backend=cpu", "--set",
                        "cache.cpu_kv_cache_space=0.25", "--max-num-seqs", "16", "--set",
                        f"parallel.device_profile={doctor}"], check=True, stdout=subprocess.DEVNULL)
        s = json.load(open(out))["layouts"][0]
        m = [x["bubble_pct"] for x in b["pipeline_usage"]["stages"]]
        p = [100 * x["bubble"] for x in s["stages"]]
        gap = max(abs(x - y) for x, y in zip(m, p))
        got, want = s["output_tokens_per_s"], b["output_tokens_per_second"]
        if a.json:
            print(json.dumps({"run": a.run, "pp": pp, "tp": tp, "measured_tok_s": want, "predicted_tok_s": got,
                              "measured": m, "predicted": p, "gap": gap}))
            continue
        fmt = lambda v: " / ".join(f"{x:.1f}" for x in v)
        print(f"pp {pp} x tp {tp}: {want:.1f} tok/s measured, {got:.1f} predicted ({100 * (got / want - 1):+.0f}%); "
              f"bubble % {fmt(m)} vs {fmt(p)}; largest gap {gap:.1f}")


if __name__ == "__main__":
    main()
