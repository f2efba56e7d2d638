"""How much of a recorded space's optimum is measurement noise.

The shipped Kernel Tuner recordings keep one time per config, the mean of 32 runs; the original
files (benchmark_hub, ``examples/spaces/README.md``) keep the 32 runs.  For each original this
prints the optimum by mean and by median, how many configs lie within two combined standard
errors of the optimum's mean (configs the recording cannot tell from it), and writes a copy of the
shipped recording whose ``time`` is the median of the runs instead of their mean, so that
``bench.py --space-dir DIR`` scores a strategy against the other reading of the same measurements.

    python benchmarks/search_quality/noise_floor.py ORIGINAL.json.gz [...] --out DIR

(each ORIGINAL named as its shipped copy, e.g. ``dedispersion_A100.json.gz``).

Why: on a space whose top is a plateau, the methodology score rewards telling apart configs
0.1-0.3% apart.  When that is inside the recording's own noise, the score there measures which
config the noise favoured, and a strategy's shortfall on that space is not a search flaw.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kerntune.evaluate import load_recording  # noqa: E402


def summary(cache: dict) -> tuple[dict, list[tuple[str, float, float]]]:
    """(facts, per config (key, mean, median)) for the configs with their individual runs."""
    rows = [(k, float(v["time"]), float(np.median(v["times"])), float(np.std(v["times"], ddof=1) / np.sqrt(len(v["times"]))))
            for k, v in cache.items() if isinstance(v.get("time"), (int, float)) and len(v.get("times") or []) > 1]
    mean = np.array([r[1] for r in rows])
    med = np.array([r[2] for r in rows])
    sem = np.array([r[3] for r in rows])
    i, j = int(np.argmin(mean)), int(np.argmin(med))
    facts = {"configs": len(rows), "runs_per_config": int(np.median([len(cache[r[0]]["times"]) for r in rows])),
             "optimum_by_mean": rows[i][0], "optimum_by_median": rows[j][0],
             "median_optimum_over_mean_optimum_median": float(med[j] / med[i]),
             "optimum_relative_standard_error": float(sem[i] / mean[i])}
    return facts, [(r[0], r[1], r[2]) for r in rows]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("originals", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True, help="folder for the median-time copies")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    report = {}
    for src in a.originals:
        name = src.name.split(".")[0]   # named as the shipped copy, e.g. dedispersion_A100.json.gz
        shipped = ROOT / "examples" / "spaces" / f"{name}.json.gz"
        facts, rows = summary(json.load(gzip.open(src))["cache"])
        # the same count `kerntune space info` prints (Recording.optimum_ties, the optimum included)
        facts["within_2_standard_errors_of_optimum"] = load_recording(src).optimum_ties()
        report[name] = facts
        print(name, json.dumps(facts))
        if shipped.exists():
            doc = json.load(gzip.open(shipped))
            medians = {k: m for k, _, m in rows}
            for k, v in doc["cache"].items():
                if k in medians:
                    v["time"] = round(medians[k], 6)
            with gzip.open(a.out / shipped.name, "wt") as f:
                json.dump(doc, f)
    (a.out / "noise_floor.json").write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
