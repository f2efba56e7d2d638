"""Prints the seventeenth pass's rows (score ± standard error per space) for the README's table:
``python benchmarks/results/search_quality/pass17/rows.py FILE.json ...``."""

import json
import sys

SPACES = ["convolution_A100", "convolution_A4000", "dedispersion_A100", "dedispersion_MI250X",
          "dedispersion_A4000", "matmul_256x8192x8192_h100", "matmul_4096_h100", "matmul_8192x8192x512_h100"]
for f in sys.argv[1:]:
    d = json.load(open(f))
    by = {r["space"]: r for r in d["rows"]}
    cells = [f"{by[s]['score']:.2f} ± {by[s]['stderr']:.2f}" if s in by else "—" for s in SPACES]
    print(f"| `{f.split('/')[-1][:-5]}` | " + " | ".join(cells) + " |")
