#!/usr/bin/env python3
"""Reads ring_experiment.cpp's output DIR: per rank its phase lengths and busy share, the cycle per token, the
share of time with k ranks computing, how often every computing rank sat on one CPU (k >= 2: a CPU idle beside
a doubled one), rank-time alone and doubled by k, and each call's speed (solo call / its time) by k.

    ring_read.py DIR"""
import sys,glob,statistics as st,collections
d=sys.argv[1]; R=len(glob.glob(d+'/r*.txt'))
ph=[];sm=[]
for r in range(R):
    P=[];S=[]
    for l in open(f'{d}/r{r}.txt'):
        p=l.split()
        if p[0]=='P': P.append((int(p[1])/1e6,int(p[2])/1e6))
        if p[0]=='S': S.append((int(p[1])/1e6,int(p[2])))
    ph.append(P); sm.append(S)
t0=200; t1=min(P[-1][1] for P in ph)-50
for r in range(R):
    dd=sorted(b-a for a,b in ph[r] if a>t0 and b<t1)
    print(f'rank {r}: n {len(dd)} dur p10 {dd[len(dd)//10]:.2f} med {st.median(dd):.2f} p90 {dd[9*len(dd)//10]:.2f} mean {st.mean(dd):.2f} busy {sum(dd)/(t1-t0):.3f}')
n0=sum(1 for a,b in ph[0] if a>t0 and b<t1); print(f'cycle per token (rank0) {(t1-t0)/n0:.2f} ms')
# grid
import bisect
occ=collections.Counter(); imb=0; tot=0
pi=[0]*R; si=[0]*R
t=t0
alone=collections.defaultdict(float); dbl=collections.defaultdict(float)
while t<t1:
    cpus={}
    k=0
    for r in range(R):
        P=ph[r]
        while pi[r]<len(P) and P[pi[r]][1]<=t: pi[r]+=1
        if pi[r]<len(P) and P[pi[r]][0]<=t:
            k+=1
            S=sm[r]
            while si[r]+1<len(S) and S[si[r]+1][0]<=t: si[r]+=1
            if S[si[r]][0]>=P[pi[r]][0] and S[si[r]][0]<=t: cpus[r]=S[si[r]][1]
    occ[k]+=1; tot+=1
    if len(cpus)==k and k>=2:
        load=collections.Counter(cpus.values())
        if len(load)==1: imb+=1
        for r,c in cpus.items():
            (alone if load[c]==1 else dbl)[k]+=0.1
    t+=0.1
print('occupancy %:',' '.join(f'{k}:{100*v/tot:.1f}' for k,v in sorted(occ.items())),'mean %.2f'%(sum(k*v for k,v in occ.items())/tot))
print(f'all computing ranks on one CPU (k>=2): {100*imb/tot:.1f}% of time')
for k in sorted(alone): print(f'  k={k}: rank-time alone {alone[k]:.0f} ms doubled {dbl[k]:.0f} ms')
# speed by k: each call's duration (between consecutive samples within a phase) vs solo, k at its midpoint
import re
solo=float(open(f'{d}/r0.txt').readline().split()[3])
ev=[]
for r in range(R):
    for a,b in ph[r]: ev+=[(a,1),(b,-1)]
ev.sort(); times=[e[0] for e in ev]; ks=[]; k=0
for tt,dd in ev: k+=dd; ks.append(k)
def k_at(t):
    i=bisect.bisect_right(times,t)-1; return ks[i] if i>=0 else 0
num=collections.defaultdict(float); den=collections.defaultdict(float)
for r in range(R):
    P=ph[r]; S=sm[r]; j=0
    for a,b in P:
        if a<t0 or b>t1: continue
        while j<len(S) and S[j][0]<a: j+=1
        prevt=a
        while j<len(S) and S[j][0]<=b+1e-6:
            kk=k_at((prevt+S[j][0])/2); num[kk]+=solo; den[kk]+=S[j][0]-prevt; prevt=S[j][0]; j+=1
print('ring speed by k:',' '.join(f'{k}:{num[k]/den[k]:.3f}' for k in sorted(num)))
