"""Mean / median best-so-far over the best measured time at evaluations 5-40, per trace file
(the figures of PASSES.md's thirty-first pass): python curves.py *.json.gz"""
import gzip
import json
import sys

import numpy as np

for f in sys.argv[1:]:
    runs = json.load(gzip.open(f))
    opt = min(t for r in runs for t, _ in r if t is not None)
    curves = np.array([np.minimum.accumulate([t if t is not None else np.inf for t, _ in r]) / opt for r in runs])
    print(f.split("/")[-1], " ".join(f"{k}:{curves[:, k - 1].mean():.2f}/{np.median(curves[:, k - 1]):.2f}"
                                      for k in (5, 8, 10, 15, 20, 30, 40)))
