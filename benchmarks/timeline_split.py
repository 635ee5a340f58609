#!/usr/bin/env python3
"""How a whole run's time splits by kind of step, from `conveyor bench ... --step-timeline FILE`.

    benchmarks/timeline_split.py FILE[.gz] [--json OUT]

The bench prints the anatomy of the most common decode step only; a throughput run also has the steps that
carry prefill chunks, and its batch grows, shrinks and is refilled. Each step's period runs from its first host
span to the next step's first (the last step: to its last span's end). Steps are grouped as decode steps by
batch size (bucketed to a power of two) and mixed steps (any prefill chunk) by their token count; per group:
steps, tokens, seconds and share of the run, mean period, and, where the run has device spans (a GPU),
the device's forward, sampling and idle time (the period less its device spans).
"""
import argparse
import collections
import gzip
import json


def load(path):
    with (gzip.open(path, 'rt') if path.endswith('.gz') else open(path)) as f:
        return json.load(f)


def bucket(n):
    b = 1
    while b < n:
        b *= 2
    return b


def split(timeline):
    shapes = {s['step']: s for s in timeline['steps']}
    spans = collections.defaultdict(list)
    for s in timeline['spans']:
        spans[s['step']].append(s)
    order = sorted(spans)
    starts = {k: min(s['begin_s'] for s in spans[k] if s['side'] == 'host') for k in order}
    groups = collections.OrderedDict()
    device = any(s['side'] == 'device' for s in timeline['spans'])
    for i, k in enumerate(order):
        shape = shapes.get(k, {'seqs': 0, 'tokens': 0, 'decode': False})
        end = starts[order[i + 1]] if i + 1 < len(order) else max(s['end_s'] for s in spans[k])
        period = end - starts[k]
        key = (f"decode, batch <= {bucket(shape['seqs'])}" if shape['decode']
               else f"mixed, tokens <= {bucket(shape['tokens'])}")
        g = groups.setdefault(key, collections.Counter())
        g['steps'] += 1
        g['tokens'] += shape['tokens']
        g['period_s'] += period
        dev = collections.Counter()
        for s in spans[k]:
            if s['side'] == 'device':
                dev[s['phase']] += s['end_s'] - s['begin_s']
        g['gpu_forward_s'] += dev['gpu forward']
        g['gpu_sample_s'] += dev['gpu sample']
        g['gpu_idle_s'] += period - sum(dev.values()) if device else 0.0
    total = sum(g['period_s'] for g in groups.values())
    return groups, total, device


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('timeline')
    ap.add_argument('--json')
    a = ap.parse_args()
    groups, total, device = split(load(a.timeline))
    print(f"{sum(g['steps'] for g in groups.values())} steps, {total:.3f} s")
    head = f"{'group':28s} {'steps':>6s} {'tokens':>9s} {'s':>8s} {'share':>6s} {'ms/step':>8s}"
    print(head + (f" {'fwd ms':>7s} {'smp ms':>7s} {'idle ms':>7s}" if device else ''))
    out = []
    for key, g in sorted(groups.items(), key=lambda kv: -kv[1]['period_s']):
        n = g['steps']
        row = {'group': key, 'steps': n, 'tokens': g['tokens'], 'seconds': g['period_s'],
               'share': g['period_s'] / total if total else 0.0, 'ms_per_step': 1e3 * g['period_s'] / n}
        line = (f"{key:28s} {n:6d} {g['tokens']:9d} {g['period_s']:8.3f} {100 * row['share']:5.1f}% "
                f"{row['ms_per_step']:8.2f}")
        if device:
            for name in ('gpu_forward_s', 'gpu_sample_s', 'gpu_idle_s'):
                row[name.replace('_s', '_ms_per_step')] = 1e3 * g[name] / n
            line += (f" {row['gpu_forward_ms_per_step']:7.2f} {row['gpu_sample_ms_per_step']:7.2f}"
                     f" {row['gpu_idle_ms_per_step']:7.2f}")
        print(line)
        out.append(row)
    if a.json:
        with open(a.json, 'w') as f:
            json.dump({'total_s': total, 'groups': out}, f, indent=1)


if __name__ == '__main__':
    main()
