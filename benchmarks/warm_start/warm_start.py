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

The same question on other recordings of one kernel at three shapes (``--spaces``, ``--space-dir``),
with other strategies (``--strategies``; ``auto``, the default strategy, takes the winners), writing
``--out``.json and .md; e.g. liger's fused-MoE down projection on an H200
(``benchmarks/warm_start/README.md``).
"""

from __future__ import annotations

import argparse
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
BUDGET, REPEATS, PAST = 200, 20, 100


def evals_to(history, optimum: float, within: float = 0.02) -> int:
    best = float("inf")
    for i, t in enumerate(history, 1):
        if t.ok:
            best = min(best, t.time_ms)
        if best <= optimum * (1 + within):
            return i
    return BUDGET + 1  # never: counted as one past the budget


def past(evs: dict, third: str, strategy: str, seed: int) -> tuple[list, list]:
    """The other two shapes tuned (``PAST`` evaluations, ``seed``) in a fresh store: their winners and
    their transfer data for the third shape."""
    ev = evs[third]
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "kt.db")
        for other in SHAPES:
            if other != third:
                run_search(evs[other], strategy, Budget(max_evals=PAST), seed, RunOptions(store=store))
        name, size = ev.workload()["kernel_name"], ev.workload()["problem_size"]
        return past_winners(store, name, size, ev.space), transfer_data(store, name, size, ev.space)


#: warm-start kind -> (strategy options, its transfer model)
TRANSFER = {"transfer": {"transfer_model": "prior"}, "transfer-task": {"transfer_model": "task"}}


def main(space_dir: str = "examples/spaces", strategies: tuple[str, ...] = ("bayes", "pattern"),
         out_prefix: str = "benchmarks/results/warm_start", command: str = "",
         title: str = "Warm start on the recorded H100 matmul shapes (issue 12)",
         transfer_kinds: tuple[str, ...] = tuple(TRANSFER)) -> None:
    evs = {n: ReplayEvaluator.from_file(f"{space_dir}/{n}.json.gz") for n in SHAPES}
    results = []
    for third in SHAPES:
        ev = evs[third]
        opt = ev.recording.optimum.time_ms
        for strategy in strategies:
            winners, transfer = past(evs, third, strategy, 0)
            cold = [evals_to(run_search(ev, strategy, Budget(max_evals=BUDGET), s).history, opt)
                    for s in range(REPEATS)]
            kinds: dict[str, tuple[dict, bool]] = {"winners": (dict(warm_start=[w.config for w in winners]), False)}
            if strategy in ("bayes", "gp"):
                per_seed = [past(evs, third, strategy, s)[1] for s in range(REPEATS)]
                for kind, opts in TRANSFER.items():
                    if kind in transfer_kinds:
                        kinds[kind] = (dict(transfer=transfer, strategy_options=opts), False)
                        kinds[kind + ", per repeat"] = (dict(strategy_options=opts), True)
            for kind, (extra, per_repeat) in kinds.items():
                warm = [evals_to(run_search(ev, strategy, Budget(max_evals=BUDGET), s, RunOptions(
                    **(dict(extra, transfer=per_seed[s]) if per_repeat else extra))).history, opt)
                        for s in range(REPEATS)]
                row = {"third_shape": third, "strategy": strategy, "warm_start": kind,
                       "warm_start_configs": len(winners) if kind == "winners" else 0,
                       "past_measurements": sum(len(r) for r in transfer) if kind.startswith("transfer") else 0,
                       "warm_from": sorted({"x".join(map(str, w.problem_size)) for w in winners}),
                       "cold_median": statistics.median(cold), "warm_median": statistics.median(warm),
                       "cold": cold, "warm": warm}
                results.append(row)
                print(f"{third} {strategy} {kind}: cold median {row['cold_median']}, warm median "
                      f"{row['warm_median']}", flush=True)
    command = command or ".venv/bin/python benchmarks/warm_start/warm_start.py"
    Path(out_prefix + ".json").write_text(json.dumps({"budget": BUDGET, "repeats": REPEATS, "within": 0.02,
                                                      "past_budget": PAST, "spaces": SHAPES, "command": command,
                                                      "results": results}, indent=1))
    lines = [f"# {title}", "",
             f"Evaluations to within 2% of the third shape's optimum, median of {REPEATS} seeds, budget {BUDGET} "
             f"({BUDGET + 1} = never). Warm: the two other shapes tuned first (same strategy, {PAST} evaluations, "
             "seed 0, or the repeat's seed where it says per repeat); `winners`: their top-3 configs measured "
             "first; `transfer`: all their measurements given to the GP as its prior mean (shipped); "
             "`transfer-task`: the same as a second task of one GP (the earlier design). Command: "
             f"`{command}` (this table; the text below it is written by hand).", "",
             "| third shape | strategy | warm start | cold | warm | warm / cold |", "|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['third_shape']} | {r['strategy']} | {r['warm_start']} | {r['cold_median']} | "
                     f"{r['warm_median']} | {r['warm_median'] / r['cold_median']:.2f} |")
    md = Path(out_prefix + ".md")
    old = md.read_text() if md.exists() else ""
    tail = old[old.index(MARKER):] if MARKER in old else MARKER + "\n"
    md.write_text("\n".join(lines) + "\n\n" + tail)


#: where the generated table ends and the hand-written reading of warm_start.md begins
MARKER = "<!-- written by hand below -->"


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spaces", help="three recordings of one kernel (names without .json.gz), comma-separated; "
                    "default: the three H100 matmul shapes")
    ap.add_argument("--space-dir", default="examples/spaces")
    ap.add_argument("--strategies", default="bayes,pattern")
    ap.add_argument("--budget", type=int, default=BUDGET)
    ap.add_argument("--past-budget", type=int, default=PAST, help="evaluations of each of the two past runs")
    ap.add_argument("--repeats", type=int, default=REPEATS)
    ap.add_argument("--out", default="benchmarks/results/warm_start", help="PREFIX: writes PREFIX.json and PREFIX.md")
    ap.add_argument("--transfer", default=",".join(TRANSFER), help="the GP's transfer kinds measured: "
                    "transfer (the shipped prior) and/or transfer-task (the earlier design)")
    ap.add_argument("--title", default="Warm start on the recorded H100 matmul shapes (issue 12)")
    a = ap.parse_args()
    if a.spaces:
        SHAPES = a.spaces.split(",")
        if len(SHAPES) != 3:
            ap.error("--spaces takes three recordings")
    BUDGET, PAST, REPEATS = a.budget, a.past_budget, a.repeats
    main(a.space_dir, tuple(a.strategies.split(",")), a.out, " ".join(["python", *sys.argv]), a.title,
         tuple(a.transfer.split(",")))
