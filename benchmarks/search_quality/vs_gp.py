"""A bench.py result against the GP's mean curve (acceptance 3 of issue 24): per space, the
strategy's mean best-so-far over its repeats divided by the GP's mean over its 20 repeats
(``classical_200x20.json``), worst between 25 and 200 evaluations (above 1: behind the GP).

    python benchmarks/search_quality/vs_gp.py benchmarks/results/search_quality/auto_local_3rep.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("result", type=Path)
    ap.add_argument("--classical", type=Path, default=ROOT / "benchmarks/results/search_quality/classical_200x20.json")
    a = ap.parse_args()
    gp = {r["space"]: r["mean_curve_over_opt"] for r in json.loads(a.classical.read_text())["rows"] if r["strategy"] == "gp"}
    print("| space | score (repeats) [95% CI] | worst vs GP mean (25-200) |\n| --- | --- | --- |")
    for r in json.loads(a.result.read_text())["rows"]:
        curve, ref = r["mean_curve_over_opt"], gp[r["space"]]
        worst, at = max((curve[i] / ref[i], i + 1) for i in range(24, min(len(curve), len(ref))))
        print(f"| {r['space']} | {r['score']:.2f} ({r['repeats']}) [{r['ci95'][0]:.2f}, {r['ci95'][1]:.2f}] | "
              f"{worst:.3f} at {at} |")


if __name__ == "__main__":
    main()
