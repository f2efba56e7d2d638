"""Prints the twenty-seventh pass's trace table: python hitsum.py convolution_A100 default gp tabu1 nostall tu05 tu03."""
import gzip, json, sys
from pathlib import Path

import numpy as np
SP=sys.argv[1]
opt={'convolution_A100':0.5536}.get(SP)
for lab in sys.argv[2:]:
    runs=json.load(gzip.open(Path(__file__).parent / f'hits_{SP}_{lab}.json.gz'))
    o=opt or min(t for r in runs for t in r if t)
    line=[lab]
    for thr in (1.3,1.08,1.0001):
        hits=np.array([next((i+1 for i in range(len(r)) if min([t for t in r[:i+1] if t] or [np.inf])<=o*thr),999) for r in runs])
        line.append(f'<={thr}: {np.mean(hits<999):.2f} med {np.median(hits):.0f}')
    arr=np.array([[min(t for t in r[:n] if t)/o for n in (40,60,100,150,200)] for r in runs])
    line.append(str(np.round(arr.mean(0),3)))
    print(' | '.join(line))
