"""Random search's methodology score on one recording over several sets of seeds, as
tests/test_score_spread.py runs it (strategy `random`, budget cut at the score's cutoff): whether an
off-zero score at one set of seeds is chance or a biased baseline.

    python benchmarks/heldout/random_seeds.py RECORDING.json.gz [--seeds 0:300 1000:1060 ...] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kerntune.compare.metrics import Reference, best_so_far, score_spread  # noqa: E402
from kerntune.evaluate import ReplayEvaluator  # noqa: E402
from kerntune.run.search import run_search  # noqa: E402
from kerntune.strategies import Budget  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("recording", type=Path)
    ap.add_argument("--seeds", nargs="+", default=["0:300", "1000:1060", "1000:1300", "5000:5600"])
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    ev = ReplayEvaluator.from_file(str(a.recording))
    rec = ev.recording
    ref = Reference.from_times(rec.ok_times, len(rec.trials) - len(rec.ok_times))
    cutoff = min(ref.cutoff(200), 200)
    rows = []
    for spec in a.seeds:
        lo, hi = map(int, spec.split(":"))
        curves = [best_so_far([t.time_ms if t.ok else None for t in
                               run_search(ev, "random", Budget(max_evals=cutoff), seed=s).history], ref.worst)
                  for s in range(lo, hi)]
        spread = score_spread(curves, ref, 200)
        rows.append({"seeds": spec, "score": spread.score, "stderr": spread.stderr})
        print(f"seeds {spec}: {spread.score:.3f} ± {spread.stderr:.3f}")
    if a.out:
        a.out.write_text(json.dumps({"command": " ".join(["python"] + sys.argv), "recording": a.recording.name,
                                     "cutoff": cutoff, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
