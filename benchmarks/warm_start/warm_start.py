"""Issue 12, acceptance 1: tuning the third recorded matmul shape after the other two.

For each choice of third shape and each strategy, 20 seeded cold runs on the third shape are
compared with 20 warm runs after the two other shapes were tuned in the same store with the same
strategy (budget 100, seed 0).  Kinds of warm start: "winners" measures the top-3 configs of each
past run first (every strategy can use that); "transfer" hands everything the past runs measured to
the GP of ``bayes`` (``kerntune.run.warm_start.transfer_data``), whose shipped model uses it as a prior
mean (``kerntune.strategies.gp_prior``); "transfer-task" is the earlier design (a second task of one
GP, ``transfer_model="task"``).  The transfer rows are also measured "per repeat": the two past runs
redone with each repeat's seed, so that the median is over the whole procedure (tune two shapes,
then the third) rather than over one pair of past records.  The figure is the number of evaluations
to come within 2% of the third shape's optimum (warm-start evaluations included); median over
repeats.

    .venv/bin/python benchmarks/warm_start/warm_start.py   # writes benchmarks/results/warm_start.json and .md
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kerntune.evaluate import ReplayEvaluator  # noqa: E402
from kerntune.run.search import RunOptions, run_search  # noqa: E402
from kerntune.run.warm_start import past_winners, transfer_data  # noqa: E402
from kerntune.store import Store  # noqa: E402
from kerntune.strategies import Budget  # noqa: E402

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


def past(evs: dict, third: str, strategy: str, seed: int) -> tuple[list, list]:
    """The other two shapes tuned (100 evaluations, ``seed``) in a fresh store: their winners and
    their transfer data for the third shape."""
    ev = evs[third]
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "kt.db")
        for other in SHAPES:
            if other != third:
                run_search(evs[other], strategy, Budget(max_evals=100), seed, RunOptions(store=store))
        name, size = ev.workload()["kernel_name"], ev.workload()["problem_size"]
        return past_winners(store, name, size, ev.space), transfer_data(store, name, size, ev.space)


#: warm-start kind -> (strategy options, its transfer model)
TRANSFER = {"transfer": {"transfer_model": "prior"}, "transfer-task": {"transfer_model": "task"}}


def main() -> None:
    evs = {n: ReplayEvaluator.from_file(f"examples/spaces/{n}.json.gz") for n in SHAPES}
    results = []
    for third in SHAPES:
        ev = evs[third]
        opt = ev.recording.optimum.time_ms
        for strategy in ("bayes", "pattern"):
            winners, transfer = past(evs, third, strategy, 0)
            cold = [evals_to(run_search(ev, strategy, Budget(max_evals=BUDGET), s).history, opt)
                    for s in range(REPEATS)]
            kinds: dict[str, tuple[dict, bool]] = {"winners": (dict(warm_start=[w.config for w in winners]), False)}
            if strategy == "bayes":
                per_seed = [past(evs, third, strategy, s)[1] for s in range(REPEATS)]
                for kind, opts in TRANSFER.items():
                    kinds[kind] = (dict(transfer=transfer, options=opts), False)
                    kinds[kind + ", per repeat"] = (dict(options=opts), True)
            for kind, (extra, per_repeat) in kinds.items():
                warm = [evals_to(run_search(ev, strategy, Budget(max_evals=BUDGET), s,
                                            **(dict(extra, transfer=per_seed[s]) if per_repeat else extra)).history,
                                 opt) for s in range(REPEATS)]
                row = {"third_shape": third, "strategy": strategy, "warm_start": kind,
                       "warm_start_configs": len(winners) if kind == "winners" else 0,
                       "past_measurements": sum(len(r) for r in transfer) if kind.startswith("transfer") else 0,
                       "warm_from": sorted({"x".join(map(str, w.problem_size)) for w in winners}),
                       "cold_median": statistics.median(cold), "warm_median": statistics.median(warm),
                       "cold": cold, "warm": warm}
                results.append(row)
                print(f"{third} {strategy} {kind}: cold median {row['cold_median']}, warm median "
                      f"{row['warm_median']}", flush=True)
    out = Path("benchmarks/results")
    (out / "warm_start.json").write_text(json.dumps({"budget": BUDGET, "repeats": REPEATS, "within": 0.02,
                                                     "command": ".venv/bin/python benchmarks/warm_start/warm_start.py",
                                                     "results": results}, indent=1))
    lines = ["# Warm start on the recorded H100 matmul shapes (issue 12)", "",
             f"Evaluations to within 2% of the third shape's optimum, median of {REPEATS} seeds, budget {BUDGET} "
             f"({BUDGET + 1} = never). Warm: the two other shapes tuned first (same strategy, 100 evaluations, "
             "seed 0, or the repeat's seed where it says per repeat); `winners`: their top-3 configs measured "
             "first; `transfer`: all their measurements given to the GP as its prior mean (shipped); "
             "`transfer-task`: the same as a second task of one GP (the earlier design). Command: "
             "`.venv/bin/python benchmarks/warm_start/warm_start.py` (this table; the text below it is written by hand).", "",
             "| third shape | strategy | warm start | cold | warm | warm / cold |", "|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['third_shape']} | {r['strategy']} | {r['warm_start']} | {r['cold_median']} | "
                     f"{r['warm_median']} | {r['warm_median'] / r['cold_median']:.2f} |")
    md = out / "warm_start.md"
    old = md.read_text() if md.exists() else ""
    tail = old[old.index(MARKER):] if MARKER in old else MARKER + "\n"
    md.write_text("\n".join(lines) + "\n\n" + tail)


#: where the generated table ends and the hand-written reading of warm_start.md begins
MARKER = "<!-- written by hand below -->"


if __name__ == "__main__":
    if any(a in ("-h", "--help") for a in sys.argv[1:]):  # it takes no arguments: say what it does, run nothing
        print(__doc__)
        sys.exit(0)
    main()
