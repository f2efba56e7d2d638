"""Search quality on the shipped recordings: methodology score with its spread per strategy
and space, the mean best-so-far curve, best/optimum at fixed budgets.

Same numbers as ``kerntune compare`` (the same ``score_spread`` and ``Reference``), without
a store (nothing to resume here) and with the spaces spread over ``--jobs`` processes.

    python benchmarks/search_quality/bench.py --strategies auto,gp,genetic,random \
        --budget 200 --repeats 20 --jobs 2 --out benchmarks/results/search_quality/classical_200x20.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

# One BLAS thread per process: the GP's many small factorisations run several times slower when
# BLAS threads oversubscribe a shared machine, and --jobs processes already use the cores.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kerntune.compare.metrics import Reference, best_so_far, score_spread  # noqa: E402
from kerntune.evaluate import ReplayEvaluator  # noqa: E402
from kerntune.run.search import RunOptions, run_search  # noqa: E402
from kerntune.strategies import Budget  # noqa: E402

SPACES = sorted(p.name[: -len(".json.gz")] for p in (ROOT / "examples" / "spaces").glob("*.json.gz"))
CHECKPOINTS = (25, 40, 60, 100, 200)


def _pad(curve: np.ndarray, n: int) -> np.ndarray:
    return curve[:n] if len(curve) >= n else np.concatenate([curve, np.full(n - len(curve), curve[-1])])


def one(space: str, strategy: str, budget: int, repeats: int, seed: int, options: dict[str, Any],
        llm: str | None = None, llm_timeout: float = 900.0, space_dir: Path | None = None,
        keep_curves: bool = False) -> dict[str, Any]:
    ev = ReplayEvaluator.from_file(str((space_dir or ROOT / "examples" / "spaces") / f"{space}.json.gz"))
    client = None
    if llm:
        from kerntune.llm import LLMClient

        client = LLMClient.from_spec(llm, timeout=llm_timeout)
    rec = ev.recording
    ref = Reference.from_times(rec.ok_times, len(rec.trials) - len(rec.ok_times))
    curves, notes, extras, t0 = [], [], [], time.perf_counter()
    for r in range(repeats):
        res = run_search(ev, strategy, Budget(max_evals=budget), seed=seed + r,
                         run=RunOptions(strategy_options=options, llm=client.for_new_run() if client else None))
        extras.append(res.extra)
        curves.append(_pad(best_so_far([t.time_ms if t.ok else None for t in res.history], ref.worst), budget))
        notes.append(res.stop_reason)
    spread = score_spread(curves, ref, budget, seed=seed)
    mean = np.mean(curves, axis=0)
    return {"space": space, "strategy": strategy, **spread.to_dict(),
            "best_over_opt_at": {n: float(np.mean([c[n - 1] for c in curves]) / ref.optimum)
                                 for n in CHECKPOINTS if n <= budget},
            "mean_curve_over_opt": [float(x / ref.optimum) for x in mean],
            "stop_reasons": sorted(set(notes)), "wall_s": time.perf_counter() - t0,
            # each repeat's own score (their mean is the score): paired.py compares two runs repeat by repeat
            "per_repeat": [round(float(x), 6) for x in spread.per_repeat],
            **({"extra_per_repeat": extras} if any(extras) else {}),
            **({"curves_over_opt": [[round(float(x / ref.optimum), 5) for x in c] for c in curves]} if keep_curves else {})}


def environment() -> dict[str, Any]:
    """What the scores depend on besides the command: the libraries whose floating point the GP and
    TPE use (another installation gives other trajectories in the last digits, PASSES.md), the tree's
    commit and the machine (CPU replays: no GPU is involved)."""
    import platform
    import subprocess
    from importlib.metadata import PackageNotFoundError, version

    libs = {}
    for name in ("numpy", "scipy", "optuna"):
        try:
            libs[name] = version(name)
        except PackageNotFoundError:
            libs[name] = None
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    return {"python": platform.python_version(), **libs, "commit": commit or None,
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--strategies", default="auto,gp,genetic,random")
    ap.add_argument("--spaces", default=",".join(SPACES))
    ap.add_argument("--budget", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("-o", "--option", action="append", default=[], help="STRATEGY.NAME=JSON")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--llm", default=None, help="a model for strategies that use one (auto, llm)")
    ap.add_argument("--llm-timeout", type=float, default=900.0)
    ap.add_argument("--space-dir", type=Path, default=None,
                    help="read SPACE.json.gz from here instead of examples/spaces (e.g. noise_floor.py's re-timed copies)")
    ap.add_argument("--curves", action="store_true",
                    help="keep every repeat's best-so-far curve (time/optimum) in the result, for vs_gp.py's noise bound")
    a = ap.parse_args()
    opts: dict[str, dict[str, Any]] = {}
    for item in a.option:
        key, _, value = item.partition("=")
        strat, _, name = key.partition(".")
        opts.setdefault(strat, {})[name] = json.loads(value)
    jobs = [(sp, st) for st in a.strategies.split(",") for sp in a.spaces.split(",")]

    env = environment()

    def write(rows: list[dict[str, Any]], summary: dict[str, Any], partial: bool,
              failed: list[dict[str, str]] | None = None) -> None:
        """The result file; rewritten after every row (``"partial": true``), so a run stopped
        part-way (hours with a model on the CPU) keeps the spaces it finished."""
        if a.out:
            a.out.parent.mkdir(parents=True, exist_ok=True)
            doc = {"command": " ".join(["python"] + sys.argv), "budget": a.budget, "llm": a.llm, "repeats": a.repeats,
                   "seed": a.seed, "options": opts, "environment": env, "summary": summary, "rows": rows}
            if partial:
                doc["partial"] = True
            if failed:
                doc["failed"] = failed
            a.out.write_text(json.dumps(doc, indent=1) + "\n")

    with ProcessPoolExecutor(a.jobs) as pool:
        futs = [pool.submit(one, sp, st, a.budget, a.repeats, a.seed, opts.get(st, {}), a.llm, a.llm_timeout, a.space_dir,
                           a.curves) for sp, st in jobs]
        rows, failed = [], []
        for f, (sp, st) in zip(futs, jobs):
            try:
                row = f.result()
            except Exception as exc:  # noqa: BLE001 - one job's failure must not lose the others' rows
                # (a job that failed at once was reported only when its turn came, after an hour of the
                # others' work, and the rows finished meanwhile were never written)
                failed.append({"space": sp, "strategy": st, "error": f"{type(exc).__name__}: {exc}"})
                print(f"{st:>10} {sp:<28} FAILED: {type(exc).__name__}: {exc}", flush=True)
                write(rows, {}, partial=True, failed=failed)
                continue
            rows.append(row)
            print(f"{row['strategy']:>10} {row['space']:<28} score {row['score']:6.3f} +- {row['stderr']:.3f} "
                  f"[{row['ci95'][0]:.2f}, {row['ci95'][1]:.2f}]  best/opt@40 {row['best_over_opt_at'].get(40, float('nan')):.3f} "
                  f"@200 {row['best_over_opt_at'].get(200, float('nan')):.3f}  {row['wall_s']:.0f}s", flush=True)
            if len(rows) + len(failed) < len(jobs):
                write(rows, {}, partial=True, failed=failed)
    summary = {}
    for st in a.strategies.split(","):
        scores = [r["score"] for r in rows if r["strategy"] == st]
        if not scores:
            continue
        summary[st] = {"mean_score": float(np.mean(scores)), "min_score": float(np.min(scores))}
        print(f"{st}: mean {summary[st]['mean_score']:.3f} min {summary[st]['min_score']:.3f}")
    write(rows, summary, partial=bool(failed), failed=failed)
    if failed:
        sys.exit(f"{len(failed)} of {len(jobs)} jobs failed (listed under \"failed\" in the result file)")


if __name__ == "__main__":
    main()
