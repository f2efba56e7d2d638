"""The thirty-first pass's table: per-space score ± standard error, and the mean over spaces, for each
LABEL=STRATEGY@FILE[+FILE...] argument (rows of that strategy in those bench.py result files).

    python benchmarks/results/search_quality/pass31/rows.py \
      default=auto@benchmarks/results/heldout/auto_gp_tpe_random_200x60_s1000.json+benchmarks/results/heldout/h200_auto_gp_tpe_random_200x60_s1000.json \
      tpe_share0.25=auto@benchmarks/results/search_quality/pass31/tpe25_heldout_h1_s1000.json+benchmarks/results/search_quality/pass31/tpe25_heldout_h2_s1000.json ...
"""
import json
import sys

cols: dict[str, dict[str, tuple[float, float]]] = {}
for arg in sys.argv[1:]:
    label, spec = arg.split("=", 1)
    strategy, files = spec.split("@", 1)
    cols[label] = {}
    for f in files.split("+"):
        for r in json.load(open(f))["rows"]:
            if r["strategy"] == strategy:
                cols[label][r["space"]] = (r["score"], r["stderr"])
spaces = sorted({s for c in cols.values() for s in c})
print("| space | " + " | ".join(cols) + " |")
print("|---|" + "---|" * len(cols))
for s in spaces:
    print(f"| {s} | "
          + " | ".join(f"{c[s][0]:.2f} ± {c[s][1]:.2f}" if s in c else "" for c in cols.values()) + " |")
line = []
for c in cols.values():
    v = [c[s] for s in spaces if s in c]
    m = sum(x[0] for x in v) / len(v)
    se = sum(x[1] ** 2 for x in v) ** 0.5 / len(v)
    line.append(f"{m:.3f} ± {se:.3f} ({len(v)} spaces)")
print("| mean | " + " | ".join(line) + " |")
