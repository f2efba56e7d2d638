"""Per-repeat methodology scores of a bench.py result written with --curves: mean (the score),
median and the lowest repeats per strategy and space.  On a space whose cutoff is short and whose
times are heavy-tailed, one run still 2x off the optimum near the cutoff scores -3 to -6 and moves
the mean of 60 repeats by 0.05-0.1: the median says what a typical run does, the tail how often a
run is left behind.

    python benchmarks/heldout/tails.py benchmarks/results/heldout/classical_200x20_s0.json [--space-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kerntune.compare.metrics import Reference, score_spread  # noqa: E402
from kerntune.evaluate import ReplayEvaluator  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("result", type=Path)
    ap.add_argument("--space-dir", type=Path, default=ROOT / "benchmarks" / "results" / "heldout" / "spaces")
    a = ap.parse_args()
    data = json.loads(a.result.read_text())
    refs: dict[str, Reference] = {}
    print("| space | strategy | cutoff | score (mean) | median | lowest three | repeats under 0 |")
    print("|---|---|---|---|---|---|---|")
    for row in data["rows"]:
        if "curves_over_opt" not in row:
            continue
        space = row["space"]
        if space not in refs:
            rec = ReplayEvaluator.from_file(a.space_dir / f"{space}.json.gz").recording
            refs[space] = Reference.from_times(rec.ok_times, len(rec.trials) - len(rec.ok_times))
        ref = refs[space]
        curves = [np.array(c) * ref.optimum for c in row["curves_over_opt"]]
        spread = score_spread(curves, ref, data["budget"])
        per = np.array(spread.per_repeat)
        low = ", ".join(f"{x:.2f}" for x in np.sort(per)[:3])
        print(f"| {space} | {row['strategy']} | {min(ref.cutoff(data['budget']), data['budget'])} | {spread.score:.2f} | "
              f"{np.median(per):.2f} | {low} | {int((per < 0).sum())} of {len(per)} |")


if __name__ == "__main__":
    main()
