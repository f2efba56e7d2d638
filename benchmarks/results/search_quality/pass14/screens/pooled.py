"""Scratch (fourteenth pass): per-space score +- se of bench.py JSONs, per seed and pooled over seeds.

    python pooled.py NAME FILE_s1000.json [FILE_s2000.json ...]   (repeat NAME FILE... groups separated by --)"""
import json
import math
import sys

SHORT = {"convolution_A100": "conv A100", "convolution_A4000": "conv A4000", "dedispersion_A100": "dedisp A100",
         "dedispersion_A4000": "dedisp A4000", "dedispersion_MI250X": "dedisp MI250X",
         "matmul_256x8192x8192_h100": "mm 256", "matmul_4096_h100": "mm 4096", "matmul_8192x8192x512_h100": "mm 8192x512"}
ORDER = list(SHORT)


def load(f):
    d = json.load(open(f))
    return d["seed"], d["repeats"], {r["space"]: (r["score"], r["stderr"]) for r in d["rows"]}


def row(name, label, sc):
    cells = [f"{sc[s][0]:.2f} ± {sc[s][1]:.2f}" if s in sc else "—" for s in ORDER]
    if all(s in sc for s in ORDER):
        m = sum(sc[s][0] for s in ORDER) / 8
        e = math.sqrt(sum(sc[s][1] ** 2 for s in ORDER)) / 8
        w = min(ORDER, key=lambda s: sc[s][0])
        tail = f"{m:.3f} ± {e:.3f} | {sc[w][0]:.2f} ({SHORT[w]})"
    else:
        tail = "— | —"
    return f"| {name} | {label} | " + " | ".join(cells) + f" | {tail} |"


groups, cur = [], []
for a in sys.argv[1:]:
    if a == "--":
        groups.append(cur); cur = []
    else:
        cur.append(a)
if cur:
    groups.append(cur)
for g in groups:
    name, files = g[0], g[1:]
    runs = [load(f) for f in files]
    for seed, rep, sc in runs:
        print(row(name, f"{seed}, {rep}", sc))
    if len(runs) > 1:
        pooled = {}
        for s in ORDER:
            have = [r[2][s] for r in runs if s in r[2]]
            if len(have) == len(runs):
                pooled[s] = (sum(h[0] for h in have) / len(have), math.sqrt(sum(h[1] ** 2 for h in have)) / len(have))
        print(row(f"**{name}**", f"pooled ({sum(r[1] for r in runs)})", pooled))
