#!/usr/bin/env python3
"""Pools bench/server_load.sh runs: the resolve/floor ratio of every round.

  bench/load_rounds_pooled.py LOG...   (each LOG: the output of one or more
  server_load.sh runs, each preceded by a line "=== KNOWN_ETAG=0|1
  profile=PATH", as bench/RESULTS-server.md's runs were logged)

One round's QPS on the development VM moves by +-20% against the next, so a
single cell's ratio is weak evidence; this prints each cell's rounds pooled
over the logs (median, mean, standard deviation and standard error) and all
cells together.
"""
import re,statistics,sys
cells={}
for path in sys.argv[1:]:
    log=open(path).read()
    for block in log.split('=== ')[1:]:
        head=block.splitlines()[0]
        key=(re.search(r'profile=\S*/(\S+)',head).group(1)[:5], re.search(r'KNOWN_ETAG=(\d)',head).group(1))
        rows={}
        for m in re.finditer(r'^(\d+)\s+(resolve|floor|health|resolve_b)\s+(\d+)\s+(\d+)',block,re.M):
            lvl,svc,rnd,qps=m.groups()
            rows.setdefault((lvl,rnd),{})[svc]=int(qps)
        for (lvl,rnd),d in rows.items():
            cells.setdefault(key+(lvl,),[]).append(d['resolve']/d['floor'])
allr=[]
for k,v in sorted(cells.items()):
    allr+=v
    print(k, len(v), f"median {statistics.median(v):.3f} mean {statistics.mean(v):.3f} sd {statistics.stdev(v):.3f} se {statistics.stdev(v)/len(v)**.5:.3f}")
print('all', len(allr), f"median {statistics.median(allr):.3f} mean {statistics.mean(allr):.3f} se {statistics.stdev(allr)/len(allr)**.5:.3f}")
