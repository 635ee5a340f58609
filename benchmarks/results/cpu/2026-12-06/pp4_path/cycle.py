#!/usr/bin/env python3
"""A run trace against its simulated one, every STEP micro-batches: tokens, stage 0's start in each and the
difference, and each stage's compute time over those micro-batches (where the run loses time to the sim).

    cycle.py RUN_TRACE SIM_TRACE [STEP]"""
import gzip,json,sys
def load(p):
    t=json.load(gzip.open(p)); d={}
    for e in t['traceEvents']:
        if e.get('ph')=='X' and e.get('cat')=='compute':
            d[(e['tid'],e['args']['micro_batch'])]=(e['ts']/1e3,(e['ts']+e['dur'])/1e3,e['args']['tokens'])
    return d
r=load(sys.argv[1]); s=load(sys.argv[2]); P=max(k[0] for k in r)+1
M=max(k[1] for k in r)+1
step=int(sys.argv[3]) if len(sys.argv)>3 else 16
for m in range(0,M,step):
    a=r[(0,m)]; b=s[(0,m)]
    # per-stage compute sums over [m, m+step)
    rs=[sum(r[(st,x)][1]-r[(st,x)][0] for x in range(m,min(M,m+step))) for st in range(P)]
    ss=[sum(s[(st,x)][1]-s[(st,x)][0] for x in range(m,min(M,m+step))) for st in range(P)]
    print(f'mb{m:4d} tok {a[2]:4d}/{b[2]:4d} start real {a[0]:7.0f} sim {b[0]:7.0f} diff {a[0]-b[0]:6.0f} | compute real',' '.join('%5.0f'%x for x in rs),'sim',' '.join('%5.0f'%x for x in ss))
