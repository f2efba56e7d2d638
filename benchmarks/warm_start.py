"""Issue 12, acceptance 1: tuning the third recorded matmul shape after the other two.

For each choice of third shape and each strategy, 20 seeded cold runs on the third shape are
compared with 20 warm runs that first measure the winners of the two other shapes (found in a
store where those shapes were tuned with the same strategy, budget 100, seed 0). The figure is
the number of evaluations to come within 2% of the third shape's optimum (warm-start
evaluations included); median over repeats.

    .venv/bin/python benchmarks/warm_start.py   # writes benchmarks/results/warm_start.json and .md
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kerntune.evaluate import ReplayEvaluator  # noqa: E402
from kerntune.runner import run_search  # noqa: E402
from kerntune.store import Store  # noqa: E402
from kerntune.strategies import Budget  # noqa: E402
from kerntune.warmstart import past_winners  # noqa: E402

SHAPES = ["matmul_4096_h100", "matmul_8192x8192x512_h100", "matmul_256x8192x8192_h100"]
BUDGET, REPEATS = 200, 20


def evals_to(history, optimum: float, within: float = 0.02) -> int:
    best = float("inf")
    for i, t in enumerate(history, 1):
        if t.ok:
            best = min(best, t.time_ms)
        if best <= optimum * (1 + within):
            return i
    return BUDGET + 1  # never: counted as one past the budget


def main() -> None:
    evs = {n: ReplayEvaluator.from_file(f"examples/spaces/{n}.json.gz") for n in SHAPES}
    results = []
    for third in ("matmul_256x8192x8192_h100", "matmul_8192x8192x512_h100"):
        ev = evs[third]
        opt = ev.recording.optimum.time_ms
        for strategy in ("bayes", "pattern"):
            with tempfile.TemporaryDirectory() as tmp:
                store = Store(Path(tmp) / "kt.db")
                for other in SHAPES:
                    if other != third:
                        run_search(evs[other], strategy, Budget(max_evals=100), 0, store=store)
                winners = past_winners(store, ev.workload()["kernel_name"], ev.workload()["problem_size"], ev.space)
                cold = [evals_to(run_search(ev, strategy, Budget(max_evals=BUDGET), s).history, opt)
                        for s in range(REPEATS)]
                warm = [evals_to(run_search(ev, strategy, Budget(max_evals=BUDGET), s,
                                            warm_start=[w.config for w in winners]).history, opt)
                        for s in range(REPEATS)]
            row = {"third_shape": third, "strategy": strategy, "warm_start_configs": len(winners),
                   "warm_from": sorted({"x".join(map(str, w.problem_size)) for w in winners}),
                   "cold_median": statistics.median(cold), "warm_median": statistics.median(warm),
                   "cold": cold, "warm": warm}
            results.append(row)
            print(f"{third} {strategy}: cold median {row['cold_median']}, warm median {row['warm_median']} "
                  f"({len(winners)} warm-start configs)", flush=True)
    out = Path("benchmarks/results")
    (out / "warm_start.json").write_text(json.dumps({"budget": BUDGET, "repeats": REPEATS, "within": 0.02,
                                                     "command": ".venv/bin/python benchmarks/warm_start.py",
                                                     "results": results}, indent=1))
    lines = ["# Warm start on the recorded H100 matmul shapes (issue 12)", "",
             f"Evaluations to within 2% of the third shape's optimum, median of {REPEATS} seeds, budget {BUDGET} "
             f"({BUDGET + 1} = never). Warm: the two other shapes tuned first (same strategy, 100 evaluations), "
             "their top-3 winners measured first. Command: `.venv/bin/python benchmarks/warm_start.py`.", "",
             "| third shape | strategy | cold | warm | warm / cold |", "|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['third_shape']} | {r['strategy']} | {r['cold_median']} | {r['warm_median']} | "
                     f"{r['warm_median'] / r['cold_median']:.2f} |")
    (out / "warm_start.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
