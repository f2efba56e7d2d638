"""Replays a recorded LLM transcript on its recorded space and reports, per
round, the best time found against the optimum, next to classical strategies
at the same number of evaluations (mean over seeds).

    .venv/bin/python benchmarks/llm/llm_rounds_report.py SPACE TRANSCRIPT OUT.json [--seeds 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from kerntune.evaluate import ReplayEvaluator
from kerntune.llm import LLMClient
from kerntune.run.search import RunOptions, run_search
from kerntune.strategies import Budget


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("space")
    ap.add_argument("transcript")
    ap.add_argument("out")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--budget", type=int, default=100)
    args = ap.parse_args()
    ev = ReplayEvaluator.from_file(args.space)
    opt = ev.recording.optimum.time_ms
    client = LLMClient.from_spec(f"replay:{args.transcript}")
    res = run_search(ev, "llm", Budget(max_evals=args.budget), seed=0,
                     run=RunOptions(llm=client, strategy_options={"initial": 25, "refine": 15, "max_rounds": 5}))
    rounds, best, seen = [], float("inf"), 0
    sources = [ex for ex in res.llm_exchanges]
    for i, t in enumerate(res.history, 1):
        if t.ok and t.time_ms < best:
            best = t.time_ms
        seen = i
    # Best after each round: evaluations are warm-up + round sizes in order.
    counts, n = [], 0
    evals_per_round = [3] + [len(ex["accepted"]) for ex in sources]
    for k in evals_per_round:
        n = min(n + k, len(res.history))
        counts.append(n)
    curve = []
    b = float("inf")
    for t in res.history:
        if t.ok and t.time_ms < b:
            b = t.time_ms
        curve.append(b)
    for r, n in enumerate(counts):
        if n == 0:
            continue
        rounds.append({"round": r, "evaluations": n, "best_ms": curve[n - 1], "optimum_over_best": opt / curve[n - 1],
                       "valid_share": (len(sources[r - 1]["accepted"]) /
                                       max(1, len(sources[r - 1]["accepted"]) + len(sources[r - 1]["rejected"])))
                       if r > 0 else None})
    classical = {}
    for name in ("random", "bayes", "genetic", "pattern"):
        per_n = {n: [] for n in counts if n}
        for seed in range(args.seeds):
            h = run_search(ev, name, Budget(max_evals=max(counts)), seed=seed).history
            bb, c = float("inf"), []
            for t in h:
                if t.ok and t.time_ms < bb:
                    bb = t.time_ms
                c.append(bb)
            for n in per_n:
                per_n[n].append(opt / c[n - 1])
        classical[name] = {str(n): statistics.mean(v) for n, v in per_n.items()}
    out = {"space": args.space, "transcript": args.transcript, "optimum_ms": opt, "stop_reason": res.stop_reason,
           "evaluations": len(res.history), "final_best_ms": best, "final_optimum_over_best": opt / best,
           "rounds": rounds, "classical_mean_optimum_over_best_at_same_evaluations": classical,
           "classical_seeds": args.seeds,
           "command": "python benchmarks/llm/llm_rounds_report.py " + " ".join(sys.argv[1:])}
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: out[k] for k in ("final_optimum_over_best", "rounds")}, indent=1))


if __name__ == "__main__":
    main()
