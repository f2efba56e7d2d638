"""Prints the twenty-eighth pass's tables from the curves in this folder (``model_proxy.py`` writes them):

    python benchmarks/results/search_quality/pass28/summary.py
"""
import gzip
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from model_proxy import stats  # noqa: E402  (the figures of a row, as model_proxy.py prints them)


def load(name):
    return json.load(gzip.open(HERE / f"{name}.json.gz"))["curves"]


def row(space, name):
    curves = load(f"{space}_{name}")
    st = stats(space, curves)
    hits = {k: f"{st[k][0]}, {st[k][1]:.0f}" for k in ("hits_1.3", "hits_opt")}
    m = st["mean"]
    return (f"| {space} | {name} | {' / '.join(f'{m[k - 1]:.3f}' for k in (40, 60, 100, 200))} "
            f"| {st['worst']:.3f} at {st['at']} | {hits['hits_1.3']} | {hits['hits_opt']} | {st['at_0.98_by_40']} of {len(curves)} |")


print("| space | design (seeds) | mean time/opt @40 / 60 / 100 / 200 | worst vs GP mean (25-200) | within 1.3x: runs, median eval "
      "| optimum: runs, median eval | >= 0.98 by 40 |\n|---|---|---|---|---|---|---|")
for name in ("nomodel_strategy=gp_30", "nomodel_default_30", "model_default_30", "model_max_calls=1_30",
             "model_max_calls=2_30", "model_first_keep=0.6_30", "model_first_keep=0.4_30", "model_call_patience=1_30",
             "model_default_90", "model_call_patience=1_90"):
    print(row("convolution_A100", name))
print()
print("| space | design (10 seeds) | mean time/opt @40 / 60 / 100 / 200 | worst vs GP mean (25-200) | within 1.3x | optimum "
      "| >= 0.98 by 40 |\n|---|---|---|---|---|---|---|")
for space in ("convolution_A100", "convolution_A4000", "dedispersion_A100", "dedispersion_A4000", "dedispersion_MI250X",
              "matmul_256x8192x8192_h100", "matmul_4096_h100", "matmul_8192x8192x512_h100"):
    for name in ("model_default_10", "model_call_patience=1_10", "model_first_keep=0.6_call_patience=1_10"):
        print(row(space, name))
print()
a, b = load("convolution_A100_model_default_90"), load("convolution_A100_model_call_patience=1_90")


def area(c):
    return float(np.mean(1 / np.array(c[:200])[24:]))


d = np.array([area(y) - area(x) for x, y in zip(a, b)])
print(f"convolution_A100, 90 seeds, mean best/optimum over 25-200 evaluations: default {np.mean([area(x) for x in a]):.3f}, "
      f"call_patience 1 {np.mean([area(x) for x in b]):.3f}, paired difference {d.mean():+.3f} ± {d.std(ddof=1) / len(d) ** .5:.3f} "
      f"(se; {int((d != 0).sum())} of {len(d)} runs differ)")
