#!/usr/bin/env python3
"""Share of a trace's window with k stages computing, and each stage's compute time by k, for run traces
(trace_*.json.gz) and simulated ones (sim_trace_*.json.gz) alike.

    occupancy.py TRACE..."""
import gzip,json,sys
def load(p):
    t=json.load(gzip.open(p)); sp=[]
    for e in t['traceEvents']:
        if e.get('ph')=='X' and e.get('cat')=='compute':
            sp.append((e['tid'],e['ts']/1e3,(e['ts']+e['dur'])/1e3,e['args']['micro_batch']))
    return sp
for p in sys.argv[1:]:
    sp=load(p); P=max(s for s,*_ in sp)+1
    ev=[]
    for s,a,b,m in sp: ev+=[(a,1,s),(b,-1,s)]
    ev.sort(); k=0; last=ev[0][0]; occ=[0.0]*(P+1); busy=set(); per={}  # time per count
    stage_k=[[0.0]*(P+1) for _ in range(P)]
    for t,d,s in ev:
        occ[k]+=t-last
        for x in busy: stage_k[x][k]+=t-last
        last=t
        if d>0: busy.add(s); k+=1
        else: busy.discard(s); k-=1
    W=sum(occ)
    print(p, 'window %.0f'%W, 'occupancy % by #computing:', ' '.join('%d:%.1f'%(i,100*o/W) for i,o in enumerate(occ)), 'mean %.2f'%(sum(i*o for i,o in enumerate(occ))/W))
    for s in range(P): print('   stage',s,'busy ms by #computing:',' '.join('%d:%.0f'%(i,o) for i,o in enumerate(stage_k[s])))
