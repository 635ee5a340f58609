#!/usr/bin/env python3
"""Where one kernel's warps stall, from an Nsight Compute source page exported as CSV:

    ncu --set full -k regex:NAME --launch-count 1 -o prof BINARY
    ncu -i prof.ncu-rep --page source --print-source sass --csv | gzip > sass.csv.gz
    benchmarks/ncu_stalls.py sass.csv.gz [TOP]

Prints the share of each stall reason over all warp samples, then the TOP instructions (default 25) with
the most samples: samples, times executed, the SASS, and its three largest stall reasons.
"""
import csv, gzip, sys, collections
rows = list(csv.reader(gzip.open(sys.argv[1], 'rt')))
hdr = rows[1]; data = rows[2:]
ix = {h: i for i, h in enumerate(hdr)}
stalls = [h for h in hdr if h.startswith('stall_') and 'Not Issued' not in h]
tot = collections.Counter(); n_all = 0
for r in data:
    for h in stalls:
        v = r[ix[h]]
        if v and v != '-': tot[h] += int(v)
    n_all += int(r[ix['Warp Stall Sampling (All Samples)']] or 0)
print('samples', n_all)
for h, v in tot.most_common(10): print(f'  {h:28s} {v:8d} {100*v/n_all:5.1f}%')
data.sort(key=lambda r: -int(r[ix['Warp Stall Sampling (All Samples)']] or 0))
top = int(sys.argv[2]) if len(sys.argv) > 2 else 25
for r in data[:top]:
    st = sorted(((int(r[ix[h]] or 0), h[6:]) for h in stalls if r[ix[h]] not in ('', '-')), reverse=True)[:3]
    print(f"{r[ix['Warp Stall Sampling (All Samples)']]:>7} {r[ix['Instructions Executed']]:>10} {r[ix['Source']].strip()[:70]:70s} {st}")
