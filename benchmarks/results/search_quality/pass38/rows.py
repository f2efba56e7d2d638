"""The thirty-eighth pass's tables (run from the repository root):
    python benchmarks/results/search_quality/pass38/rows.py DEFAULT.json[,MORE.json] CANDIDATE.json[,MORE.json] ...
Each argument pair is two comma-separated lists of bench.py JSON files (the default's, the candidate's);
prints one row per space: both scores with their standard errors over repeats, the difference and its
standard error (the two rows' combined), and the means over the spaces."""
import json
import math
import sys


def load(arg: str) -> dict[str, tuple[float, float]]:
    out: dict[str, tuple[float, float]] = {}
    for f in arg.split(","):
        for r in json.load(open(f))["rows"]:
            if r["strategy"] == "auto":
                out[r["space"]] = (r["score"], r["stderr"])
    return out


args = sys.argv[1:]
for a, b in zip(args[::2], args[1::2]):
    d, c = load(a), load(b)
    print("| space | default | candidate | difference (se) |\n|---|---|---|---|")
    both = [s for s in d if s in c]
    for s in both:
        (x, sx), (y, sy) = d[s], c[s]
        print(f"| {s} | {x:.3f} ± {sx:.3f} | {y:.3f} ± {sy:.3f} | {y - x:+.3f} ({math.hypot(sx, sy):.3f}) |")
    if both:
        md = sum(d[s][0] for s in both) / len(both)
        mc = sum(c[s][0] for s in both) / len(both)
        se = math.sqrt(sum(d[s][1] ** 2 + c[s][1] ** 2 for s in both)) / len(both)
        print(f"| **mean of {len(both)}** | {md:.3f} | {mc:.3f} | {mc - md:+.3f} ({se:.3f}) |")
    print()
