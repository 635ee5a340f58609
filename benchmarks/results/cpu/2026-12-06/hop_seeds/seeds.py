#!/usr/bin/env python3
"""Re-simulates every kept CPU run (2026-12-06 pp4_path, rq_path, hop_seeds; 2026-12-05's 13) with the tree's model
before this folder (run queues at speed(k), hops at doctor's mean) and with the candidate (ring speeds, hops drawn
from doctor's samples), once per seed of the draw, and writes one JSON line per run, model, seed and layout
(../rq_path/resim.py --json, plus "model" and "seed"; the tree's rows have seed 0).

    seeds.py [--seeds 1,2,3,4,5,6,7,8] [--runs pp4_path/run11,...] [--shape FILE] [--out seeds.jsonl]

Runs whose doctor kept no hop samples (all but pp4_path run11-15) get busy_hop_samples_us = busy_hop_shape.json
(the pooled busy hops of runs 11, 13, 14, 15, each over its run's mean; --shape another such file, e.g.
uniform_shape.json, 30 points evenly over 0-2) times their own doctor's busy_hop_us.
Runs without the ring probe get ../pp4_path/ring_mean.json; 2026-12-05's runs, without the stayer probe,
stickiness 3:1.0,4:0.23 (as rq_path's old_runs.jsonl). The seed reaches the simulator through the environment
(CONVEYOR_HOP_SEED, and CONVEYOR_HOP_DRAWS for the runs averaged) only in a build with seed_hook.diff applied;
the tree's build ignores both and gives every seed the same answer."""
import argparse
import json
import os
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DAY = os.path.dirname(HERE)
OLD = os.path.join(DAY, "..", "2026-12-05")
RESIM = os.path.join(DAY, "rq_path", "resim.py")
SAMPLED = [f"pp4_path/run{n}" for n in (11, 13, 14, 15)]
RUNS = ([f"pp4_path/run{n}" for n in (1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 13, 14, 15)] + [f"rq_path/run{n}" for n in range(1, 6)]
        + [f"../2026-12-05/pp3_path/run{n}" for n in (1, 2)]
        + [f"../2026-12-05/tp_path/run{n}" for n in (1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12)]
        + [f"hop_seeds/run{n}" for n in (1, 2, 4)])
TREE_DROP = "pipeline_speed,hop_samples_us,busy_hop_samples_us"


def sharing(run):
    return json.load(open(os.path.join(DAY, run, "doctor.json")))["device"]["sharing"]


def write_shape(path):
    shape = []
    for run in SAMPLED:
        sh = sharing(run)
        shape += [x / sh["busy_hop_us"] for x in sh["busy_hop_samples_us"]]
    json.dump(sorted(shape), open(path, "w"), indent=0)


def candidate_args(run, tmp, shape_file):
    sh, args = sharing(run), []
    if "busy_hop_samples_us" not in sh:
        shape = json.load(open(shape_file))
        path = os.path.join(tmp, run.replace("/", "_").replace(".", "") + "_busy.json")
        json.dump([x * sh["busy_hop_us"] for x in shape], open(path, "w"))
        args += ["--graft", f"busy_hop_samples_us={path}"]
    if "pipeline_speed" not in sh:
        args += ["--graft", f"pipeline_speed={os.path.join(DAY, 'pp4_path', 'ring_mean.json')}"]
    return args


def resim(run, args, seed, tmp):
    env = dict(os.environ, CONVEYOR_HOP_SEED=str(seed))
    if "stickiness" not in sharing(run):
        args = args + ["--sticky", "3:1.0,4:0.23"]
    out = subprocess.run(["python3", RESIM, os.path.join(DAY, run), "--json", "--tag", "x", "--out",
                          os.path.join(tmp, "out")] + args, env=env, check=True, capture_output=True, text=True).stdout
    return [json.loads(l) for l in out.splitlines()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="1,2,3,4,5,6,7,8")
    ap.add_argument("--runs", default=",".join(RUNS))
    ap.add_argument("--shape", default=os.path.join(HERE, "busy_hop_shape.json"))
    ap.add_argument("--out", default=os.path.join(HERE, "seeds.jsonl"))
    a = ap.parse_args()
    if not os.path.exists(a.shape):
        write_shape(a.shape)
    with tempfile.TemporaryDirectory() as tmp, open(a.out, "w") as f:
        for run in a.runs.split(","):
            rows = [("tree", 0, r) for r in resim(run, ["--drop", TREE_DROP], 1, tmp)]
            for seed in (int(s) for s in a.seeds.split(",")):
                rows += [("candidate", seed, r) for r in resim(run, candidate_args(run, tmp, a.shape), seed, tmp)]
            for model, seed, r in rows:
                r.update(run=run, model=model, seed=seed)
                f.write(json.dumps(r) + "\n")
            f.flush()
            print(run, "done", flush=True)


if __name__ == "__main__":
    main()
