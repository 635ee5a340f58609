#!/usr/bin/env python3
"""Compares a Slurm job's results JSONL with a one-rank reference run of the same input.

Every custom_id of the input must be in the output exactly once, with status 200 and the same token
ids and text as the reference. With --partial the output may lack some ids (a job ended for good by
scancel), but it must not hold any twice, nor all of them.
"""
import argparse
import json
import sys


def load(path):
    rows = {}
    dups = []
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            row = json.loads(line)
            cid = row["custom_id"]
            if cid in rows:
                dups.append(cid)
            rows[cid] = row
    return rows, dups


def choice(row):
    body = row["response"]["body"]
    c = body["choices"][0]
    text = c.get("text", c.get("message", {}).get("content"))
    return row["response"]["status_code"], c.get("token_ids"), text


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("input")
    ap.add_argument("reference")
    ap.add_argument("output")
    ap.add_argument("--partial", action="store_true")
    a = ap.parse_args()
    want = [json.loads(l)["custom_id"] for l in open(a.input) if l.strip()]
    ref, _ = load(a.reference)
    out, dups = load(a.output)
    errors = []
    if dups:
        errors.append(f"written more than once: {sorted(set(dups))}")
    missing = [c for c in want if c not in out]
    extra = sorted(set(out) - set(want))
    if extra:
        errors.append(f"ids not in the input: {extra}")
    if a.partial:
        if not missing:
            errors.append("every request finished, but the job was to be ended before that")
    elif missing:
        errors.append(f"missing {len(missing)} of {len(want)}: {missing[:10]}")
    for cid in want:
        if cid in out and choice(out[cid]) != choice(ref[cid]):
            errors.append(f"{cid}: {choice(out[cid])} != one-rank {choice(ref[cid])}")
    if errors:
        print("FAIL: " + a.output + ": " + "; ".join(errors))
        return 1
    print(f"ok: {len(out)} of {len(want)} ids once each, equal to the one-rank run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
