"""Prints a trace table of the twenty-seventh and twenty-ninth passes: for each LABEL, the share of runs
reaching 1.3x, 1.08x and the optimum (the recording's best) with the median evaluation, and the mean
best/optimum at 40 / 60 / 100 / 150 / 200 evaluations, from hits_SPACE_LABEL.json.gz in this folder or
in a --dir given (``hits_options.py`` makes the traces):

    python hitsum.py convolution_A100 default gp tabu1 nostall tu05 tu03
    python hitsum.py convolution_A4000 default trb1 --dir ../../pass29
"""
import argparse
import gzip
import json
from pathlib import Path

import numpy as np

from kerntune.evaluate import ReplayEvaluator

HERE = Path(__file__).resolve().parent
ap = argparse.ArgumentParser()
ap.add_argument("space")
ap.add_argument("labels", nargs="+")
ap.add_argument("--dir", type=Path, action="append", default=[])
a = ap.parse_args()
o = min(ReplayEvaluator.from_file(HERE.parents[4] / "examples" / "spaces" / f"{a.space}.json.gz").recording.ok_times)
for lab in a.labels:
    path = next(p for p in (d / f"hits_{a.space}_{lab}.json.gz" for d in [HERE, *a.dir]) if p.exists())
    runs = json.load(gzip.open(path))
    line = [lab]
    for thr in (1.3, 1.08, 1.0001):
        hits = np.array([next((i + 1 for i in range(len(r)) if min([t for t in r[:i + 1] if t] or [np.inf]) <= o * thr), 999)
                         for r in runs])
        line.append(f'<={thr}: {np.mean(hits < 999):.2f} med {np.median(hits):.0f}')
    arr = np.array([[min(t for t in r[:n] if t) / o for n in (40, 60, 100, 150, 200)] for r in runs])
    line.append(str(np.round(arr.mean(0), 3)))
    print(' | '.join(line))
