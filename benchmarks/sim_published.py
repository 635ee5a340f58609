#!/usr/bin/env python3
"""Predicted vs published multi-GPU figures (issue 18, item 5), one command:

    benchmarks/sim_published.py [--conveyor build/conveyor] [--out benchmarks/results/sim_published]

Runs `conveyor plan --cluster` on one H200 node in FP8 (configs/clusters/h200-8-fp8.yaml: speeds
measured by `conveyor doctor` on one H200) with 1, 2, 4 and 8 GPUs, one workload for every row
(1000 in / 1000 out, all prompts at once, the same scheduler limits), and prints the markdown table of
docs/bench.md. Published: NVIDIA TensorRT-LLM perf overview v0.17, H200, FP8, 1000/1000, output tok/s
in total; NVIDIA's statement that Llama-3.1-405B on 8 H200 gives 1.5x the maximum throughput with
pipeline parallel 8 than with tensor parallel 8. Nothing here is tuned per row."""
import argparse
import json
import os
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKLOAD = "prompts=2048,input=1000,output=1000,max_num_seqs=1024,max_num_batched_tokens=8192"
MIN_LATENCY = "prompts=1,input=1000,output=1000"
PUBLISHED_70B = {1: 2823, 2: 5165, 4: 8911, 8: 13181}


def cluster_file(tmp, gpus):
    """The FP8 H200 node file with `gpus` GPUs on it."""
    src = open(os.path.join(ROOT, "configs/clusters/h200-8-fp8.yaml")).read()
    doctor = os.path.join(ROOT, "benchmarks/results/nvidia-h200/doctor.json")
    text = src.replace("gpus_per_node: 8", f"gpus_per_node: {gpus}").replace(
        "../../benchmarks/results/nvidia-h200/doctor.json", doctor)
    path = os.path.join(tmp, f"h200-{gpus}-fp8.yaml")
    open(path, "w").write(text)
    return path


def plan(conveyor, tmp, gpus, model, workload=WORKLOAD):
    out = os.path.join(tmp, f"plan-{gpus}-{os.path.basename(model)}.json")
    subprocess.run([conveyor, "plan", "--cluster", cluster_file(tmp, gpus), "--set",
                    f"model.config={os.path.join(ROOT, 'configs/models', model)}", "--workload", workload,
                    "--top", "0", "--output-json", out], check=True, stdout=subprocess.DEVNULL)
    return json.load(open(out))


def best(layouts, data, pipeline, tensor):
    rows = [r for r in layouts if r["fits"] and (r["data"], r["pipeline"], r["tensor"]) == (data, pipeline, tensor)]
    return max(rows, key=lambda r: r["output_tokens_per_s"]) if rows else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conveyor", default=os.path.join(ROOT, "build/conveyor"))
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks/results/sim_published"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    results = {"workload": WORKLOAD, "rows": []}
    with tempfile.TemporaryDirectory() as tmp:
        lines = ["| model | layout (dp x pp x tp, M) | predicted output tok/s | published | predicted / published | "
                 "what limits it (simulator) |", "| --- | --- | --- | --- | --- | --- |"]
        for tp, published in PUBLISHED_70B.items():
            r = best(plan(args.conveyor, tmp, tp, "llama-3.1-70b.yaml")["layouts"], 1, 1, tp)
            got = r["output_tokens_per_s"] if r else 0.0
            results["rows"].append({"model": "llama-3.1-70b", "tensor": tp, "predicted": got, "published": published,
                                    "layout": r})
            lines.append(f"| Llama-3.1-70B | 1 x 1 x {tp}, M 1 | {got:,.0f} | {published:,} | {got / published:.2f} | "
                         f"{r['reason']}; {r['peak_running']} running at most |")
        layouts = plan(args.conveyor, tmp, 8, "llama-3.1-405b.yaml")["layouts"]
        pp, tp = best(layouts, 1, 8, 1), best(layouts, 1, 1, 8)
        for name, r in (("pp 8", pp), ("tp 8", tp)):
            results["rows"].append({"model": "llama-3.1-405b", "layout_name": name, "layout": r})
            lines.append(f"| Llama-3.1-405B | 1 x {r['pipeline']} x {r['tensor']}, M {r['micro_batches']} | "
                         f"{r['output_tokens_per_s']:,.0f} | - | - | {r['reason']}; {r['peak_running']} running at most |")
        ratio = pp["output_tokens_per_s"] / tp["output_tokens_per_s"]
        lines.append(f"| Llama-3.1-405B | pp 8 / tp 8 | {ratio:.2f}x | 1.5x | {ratio / 1.5:.2f} | - |")
        one = plan(args.conveyor, tmp, 8, "llama-3.1-405b.yaml", MIN_LATENCY)["layouts"]
        lp, lt = best(one, 1, 8, 1), best(one, 1, 1, 8)
        lines.append(f"| Llama-3.1-405B | one request 1000/1000, TPOT p50 pp 8 / tp 8 | "
                     f"{lp['tpot_s']['p50'] * 1e3:.1f} / {lt['tpot_s']['p50'] * 1e3:.1f} ms | tp lower | - | - |")
        results["min_latency_tpot_s"] = {"pp8": lp["tpot_s"]["p50"], "tp8": lt["tpot_s"]["p50"]}
        results["pp8_over_tp8"] = ratio
    table = "\n".join(lines)
    print(table)
    open(os.path.join(args.out, "table.md"), "w").write(table + "\n")
    json.dump(results, open(os.path.join(args.out, "published.json"), "w"), indent=2)


if __name__ == "__main__":
    main()
