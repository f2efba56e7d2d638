"""A bench.py result against the GP's mean curve (acceptance 3 of issue 24): per space, the
strategy's mean best-so-far over its repeats divided by the GP's mean over its 20 repeats
(``classical_200x20.json``), worst between 25 and 200 evaluations (above 1: behind the GP).

    python benchmarks/search_quality/vs_gp.py benchmarks/results/search_quality/auto_local_3rep.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Sequence

ROOT = Path(__file__).resolve().parents[2]


CLASSICAL = ROOT / "benchmarks/results/search_quality/classical_200x20.json"


def gp_mean_curves(classical: Path = CLASSICAL) -> dict[str, list[float]]:
    """Per space, the GP's mean best-so-far over the optimum (time/optimum, one entry per evaluation)."""
    return {r["space"]: r["mean_curve_over_opt"] for r in json.loads(classical.read_text())["rows"]
            if r["strategy"] == "gp"}


def worst_vs(curve: Sequence[float], ref: Sequence[float]) -> tuple[float, int]:
    """The largest ratio of ``curve`` to ``ref`` between 25 and 200 evaluations, and where."""
    return max((float(curve[i] / ref[i]), i + 1) for i in range(24, min(len(curve), len(ref))))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("result", type=Path)
    ap.add_argument("--classical", type=Path, default=CLASSICAL)
    a = ap.parse_args()
    gp = gp_mean_curves(a.classical)
    print("| space | score (repeats) [95% CI] | worst vs GP mean (25-200) |\n| --- | --- | --- |")
    for r in json.loads(a.result.read_text())["rows"]:
        worst, at = worst_vs(r["mean_curve_over_opt"], gp[r["space"]])
        print(f"| {r['space']} | {r['score']:.2f} ({r['repeats']}) [{r['ci95'][0]:.2f}, {r['ci95'][1]:.2f}] | "
              f"{worst:.3f} at {at} |")


if __name__ == "__main__":
    main()
