"""The thirty-ninth pass's stage-2 table (run from the repository root):
    python benchmarks/results/search_quality/pass39/pooled.py
Per development space: the default and fail_block 0.5 at seeds 1000 and 2000 (60 repeats each), pooled
as the mean of the two seeds' scores with standard error sqrt(se1^2 + se2^2) / 2, and the difference
with its standard error (the two pooled rows' combined)."""
import json
import math
from pathlib import Path

R = Path("benchmarks/results/search_quality")
FILES = {"default": {1000: ["pass37/default36_conv_s1000.json", "pass39/default_rest6_s1000.json"],
                     2000: ["pass39/default_dev8_s2000.json"]},
         "fail_block 0.5": {1000: ["pass39/fb05_conv_s1000.json", "pass39/fb05_rest6_s1000.json"],
                            2000: ["pass39/fb05_dev8_s2000.json"]}}


def rows(design: str, seed: int) -> dict[str, tuple[float, float]]:
    out = {}
    for f in FILES[design][seed]:
        for r in json.loads((R / f).read_text())["rows"]:
            if r["strategy"] == "auto":
                out[r["space"]] = (r["score"], r["stderr"])
    return out


d = {s: rows("default", s) for s in (1000, 2000)}
c = {s: rows("fail_block 0.5", s) for s in (1000, 2000)}
print("| space | default 1000 / 2000 | fail_block 0.5 1000 / 2000 | default pooled | fail_block 0.5 pooled | difference (se) |")
print("|---|---|---|---|---|---|")
md, mc, var = [], [], 0.0
for sp in d[2000]:
    dp = sum(d[s][sp][0] for s in d) / 2
    cp = sum(c[s][sp][0] for s in c) / 2
    se = math.sqrt(sum(d[s][sp][1] ** 2 + c[s][sp][1] ** 2 for s in d)) / 2
    md.append(dp), mc.append(cp)
    var += sum(d[s][sp][1] ** 2 + c[s][sp][1] ** 2 for s in d) / 4
    print(f"| {sp} | {d[1000][sp][0]:.3f} / {d[2000][sp][0]:.3f} | {c[1000][sp][0]:.3f} / {c[2000][sp][0]:.3f} "
          f"| {dp:.3f} | {cp:.3f} | {cp - dp:+.3f} ({se:.3f}) |")
n = len(md)
print(f"| **mean of {n}** | | | {sum(md) / n:.3f} | {sum(mc) / n:.3f} | {(sum(mc) - sum(md)) / n:+.3f} ({math.sqrt(var) / n:.3f}) |")
