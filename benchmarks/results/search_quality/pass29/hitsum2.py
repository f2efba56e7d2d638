"""Prints the twenty-ninth pass's trace table (run from the repository root):
python benchmarks/results/search_quality/pass29/hitsum2.py
Traces: pass27/traces/hits_options.py SPACE 30 LABEL OPTIONS (at commit named in PASSES.md), gzipped here;
convolution_A100's default traces are the twenty-seventh pass's."""
import gzip
import json
from pathlib import Path

import numpy as np

from kerntune.evaluate import ReplayEvaluator

HERE = Path(__file__).parent
FILES = {("convolution_A100", "default"): HERE.parent / "pass27/traces/hits_convolution_A100_default.json.gz"}
for sp in ("convolution_A100", "convolution_A4000"):
    o = min(ReplayEvaluator.from_file(f"examples/spaces/{sp}.json.gz").recording.ok_times)
    for lab in ("default", "trb1"):
        runs = json.load(gzip.open(FILES.get((sp, lab), HERE / f"hits_{sp}_{lab}.json.gz")))
        line = [sp, lab]
        for thr in (1.3, 1.08, 1.0001):
            hits = np.array([next((i + 1 for i in range(len(r)) if min([t for t in r[:i + 1] if t] or [np.inf]) <= o * thr), 999)
                             for r in runs])
            line.append(f"<={thr}: {int(np.sum(hits < 999))} of {len(runs)}, median {np.median(hits):.0f}")
        arr = np.array([[min(t for t in r[:n] if t) / o for n in (40, 60, 100, 150, 200)] for r in runs])
        line.append(" / ".join(f"{x:.3f}" for x in arr.mean(0)))
        print(" | ".join(line))
