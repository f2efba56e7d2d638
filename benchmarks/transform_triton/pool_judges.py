"""Pool several judge JSONs of one kernel file (``rerun.py --judge`` output) into one share of the vendor
per candidate: the median of every paired per-round ratio (the vendor's time over the candidate's, each
round's two windows taken in one GPU state) over the judges' concatenated rounds, with its 95% interval.

    python benchmarks/transform_triton/pool_judges.py JUDGE.json [JUDGE.json ...]

One JSON line: per candidate its pooled share, interval, rounds and each judge's own median.
"""

from __future__ import annotations

import json
import sys

from kerntune.evaluate.protocol import speedup


def pool(paths: list[str]) -> dict[str, dict[str, object]]:
    vendor: dict[str, list[float]] = {}
    mine: dict[str, list[float]] = {}
    each: dict[str, list[float]] = {}
    for path in paths:
        d = json.load(open(path))
        rounds = d["rounds_ms"]
        for name, xs in rounds.items():
            if name == "vendor":
                continue
            vendor.setdefault(name, []).extend(rounds["vendor"])
            mine.setdefault(name, []).extend(xs)
            each.setdefault(name, []).append(round(d[f"{name}_share_of_vendor"]["median"], 3))
    out = {}
    for name in mine:
        s = speedup(vendor[name], mine[name])  # the vendor's time over the candidate's
        out[name] = {"share": round(s.median, 4), "ci": [round(s.lo, 4), round(s.hi, 4)], "rounds": s.n,
                     "judges": each[name]}
    return out


if __name__ == "__main__":
    print(json.dumps(pool(sys.argv[1:])))
