"""Prints the seventeenth pass's rows (score ± standard error per space; with all eight spaces also
the mean ± its standard error and the worst space) for the README's tables:
``python benchmarks/results/search_quality/pass17/rows.py FILE.json[+FILE.json] ...`` (``+`` joins the
runs of one design that cover different spaces; ``,`` pools seeds: the mean of their scores, its standard
error sqrt(sum of squared errors) / seeds, over the spaces every seed covers)."""

import json
import math
import sys

SPACES = ["convolution_A100", "convolution_A4000", "dedispersion_A100", "dedispersion_MI250X",
          "dedispersion_A4000", "matmul_256x8192x8192_h100", "matmul_4096_h100", "matmul_8192x8192x512_h100"]
for arg in sys.argv[1:]:
    groups = []
    for g in arg.split(","):
        rows = {}
        for f in g.split("+"):
            rows.update({r["space"]: r for r in json.load(open(f))["rows"]})
        groups.append(rows)
    k = len(groups)
    by = {s: {"score": sum(g[s]["score"] for g in groups) / k,
              "stderr": math.sqrt(sum(g[s]["stderr"] ** 2 for g in groups)) / k}
          for s in SPACES if all(s in g for g in groups)}
    cells = [f"{by[s]['score']:.2f} ± {by[s]['stderr']:.2f}" if s in by else "—" for s in SPACES]
    tail = ""
    if all(s in by for s in SPACES):
        mean = sum(by[s]["score"] for s in SPACES) / len(SPACES)
        se = math.sqrt(sum(by[s]["stderr"] ** 2 for s in SPACES)) / len(SPACES)
        worst = min(SPACES, key=lambda s: by[s]["score"])
        tail = f" | {mean:.3f} ± {se:.3f} | {by[worst]['score']:.2f} ({worst})"
    name = ", ".join(" + ".join(f"`{f.split('/')[-1][:-5]}`" for f in g.split("+")) for g in arg.split(","))
    print(f"| {name} | " + " | ".join(cells) + tail + " |")
