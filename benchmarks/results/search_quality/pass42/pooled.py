"""The forty-second pass's stage 2 (run from the repository root): the development spaces that hold failed
configs, default and `tpe_on_failure` 20 at seeds 2000 and 3000 (60 repeats each), pooled over both seeds;
the dedispersion spaces hold no failed config and are the default's by construction (their pooled rows
from the thirty-ninth pass's files).
    python benchmarks/results/search_quality/pass42/pooled.py"""
import json
import math

R = "benchmarks/results/search_quality/"


def rows(*files: str) -> dict[str, tuple[float, float]]:
    out = {}
    for f in files:
        for r in json.load(open(R + f))["rows"]:
            out[r["space"]] = (r["score"], r["stderr"])
    return out


default = {2000: rows("pass39/fb05_dev8_s2000.json"), 3000: rows("pass42/default_conv_s3000.json", "pass42/default_matmul3_s3000.json")}
cand = {2000: rows("pass42/tof20_fail5_s2000.json"), 3000: rows("pass42/tof20_conv_s3000.json", "pass42/tof20_matmul3_s3000.json")}
dedisp = ["dedispersion_A100", "dedispersion_A4000", "dedispersion_MI250X"]
print("| space | default 2000 / 3000 | `tpe_on_failure` 20 2000 / 3000 | default pooled | candidate pooled | difference (se) |")
print("|---|---|---|---|---|---|")
dm, cm = [], []
for sp in sorted(cand[2000]):
    d = [default[s][sp] for s in (2000, 3000)]
    c = [cand[s][sp] for s in (2000, 3000)]
    dp, cp = sum(x[0] for x in d) / 2, sum(x[0] for x in c) / 2
    se = math.sqrt(sum(x[1] ** 2 for x in d + c)) / 2
    dm.append(dp); cm.append(cp)
    print(f"| {sp} | {d[0][0]:.3f} / {d[1][0]:.3f} | {c[0][0]:.3f} / {c[1][0]:.3f} | {dp:.3f} | {cp:.3f} | {cp - dp:+.3f} ({se:.3f}) |")
for sp in dedisp:  # seed 2000's default row stands for both seeds' difference, which is zero
    v = default[2000][sp][0]
    dm.append(v); cm.append(v)
    print(f"| {sp} | identical (no failure) | | | | 0 |")
print(f"| **mean of 8** (five pooled over both seeds; the dedispersion three at seed 2000, equal on both sides) | | | {sum(dm) / 8:.3f} | {sum(cm) / 8:.3f} | {(sum(cm) - sum(dm)) / 8:+.3f} |")
