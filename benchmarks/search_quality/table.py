"""Markdown table of a bench.py JSON: methodology score +- standard error per space and strategy.

    python benchmarks/search_quality/table.py benchmarks/results/search_quality/classical_200x20.json
"""

from __future__ import annotations

import argparse
import json

parser = argparse.ArgumentParser(description="Markdown table of a bench.py JSON (score +- standard error)")
parser.add_argument("file", help="a bench.py --out JSON")
data = json.load(open(parser.parse_args().file))
rows = data["rows"]
strategies = list(dict.fromkeys(r["strategy"] for r in rows))
spaces = list(dict.fromkeys(r["space"] for r in rows))
cell = {(r["space"], r["strategy"]): r for r in rows}
print(f"budget {data['budget']}, {data['repeats']} repeats; score +- standard error (best/optimum after 40 evaluations)\n")
print("| space | " + " | ".join(strategies) + " |")
print("| --- |" + " --- |" * len(strategies))
for sp in spaces:
    out = []
    for st in strategies:
        r = cell.get((sp, st))
        out.append("" if r is None else f"{r['score']:.2f} ± {r['stderr']:.2f} ({1 / r['best_over_opt_at']['40']:.2f})")
    print(f"| {sp} | " + " | ".join(out) + " |")
means = [sum(cell[(sp, st)]["score"] for sp in spaces if (sp, st) in cell) / max(1, sum((sp, st) in cell for sp in spaces))
         for st in strategies]
mins = [min(cell[(sp, st)]["score"] for sp in spaces if (sp, st) in cell) for st in strategies]
print("| **mean** | " + " | ".join(f"**{m:.2f}**" for m in means) + " |")
print("| **min** | " + " | ".join(f"{m:.2f}" for m in mins) + " |")
