"""``make demo``: kerntune's main job in a few minutes, through the Python API.

Two paths, and it says which it took:

* no NVIDIA GPU (``nvidia-smi`` fails): an LLM-guided search against the best
  classical strategy on a shipped recorded space (an H100 matmul, replayed: no
  GPU needed).  The model is not live: its answers are a strong model's
  committed transcript (``benchmarks/llm/transcripts/``), replayed through
  ``replay:``; the table says so.  The transcript was answered at seed 0, so the
  LLM row is that one search; the classical row is 10 seeds.
* an NVIDIA GPU: ``examples/triton/matmul.py`` tuned for real at 4096^3, the
  winner re-timed against the kernel's default config.

Why a script and not a CLI line: one table with rows from two runs, and it shows
the API (``kerntune.compare`` / ``kerntune.tune``) at work.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

import kerntune

ROOT = Path(__file__).resolve().parent.parent
STORE = Path(os.environ.get("KERNTUNE_DEMO_STORE", ".kerntune/demo.db"))
NAME = "matmul_256x8192x8192_h100"
SPACE = ROOT / "examples/spaces" / f"{NAME}.json.gz"
TRANSCRIPT = ROOT / "benchmarks/llm/transcripts" / f"{NAME}.llm.jsonl"
CLASSICAL_RESULTS = ROOT / "benchmarks/results" / f"compare_{NAME}.json"
# The options the transcript was recorded with (benchmarks/llm/strong_model_files.sh).
LLM_OPTIONS = {"initial": 25, "refine": 15, "max_rounds": 5}
console = Console(width=None if sys.stdout.isatty() else 130)  # a log keeps the table whole


def has_nvidia_gpu() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def best_classical() -> str:
    """The classical strategy with the best score in the committed comparison on this space."""
    scores = json.loads(CLASSICAL_RESULTS.read_text())["strategies"]
    return max(scores, key=lambda name: scores[name]["score"])


def replay_path() -> None:
    classical = best_classical()
    console.print(f"[bold]kerntune demo: replay path[/bold] (no NVIDIA GPU: nvidia-smi is missing or fails)\n"
                  f"space: {SPACE.relative_to(ROOT)} (recorded on an H100; replayed, nothing is measured)\n"
                  f"LLM-guided: strategy llm, answered by a strong model's committed transcript, REPLAYED "
                  f"(replay:{TRANSCRIPT.relative_to(ROOT)}), not a live model; seed 0, the seed it was recorded at\n"
                  f"classical: {classical}, the best classical strategy on this space in "
                  f"{CLASSICAL_RESULTS.relative_to(ROOT)}; 10 seeds")
    llm = kerntune.compare(SPACE, strategies=["llm"], budget=100, repeats=1, seed=0, store=STORE,
                           llm=f"replay:{TRANSCRIPT}", options={"llm": LLM_OPTIONS})
    cls = kerntune.compare(SPACE, strategies=[classical], budget=100, repeats=10, seed=0, store=STORE)
    table = Table(title=f"{NAME}: budget 100 evaluations, optimum {llm.optimum_ms:.4g} ms "
                        "(score: 1 = optimum at once, 0 = no better than random search)")
    for col in ("strategy", "seeds", "score", "95% interval", "best/optimum", "found optimum", "evals to 2%"):
        table.add_column(col, justify="left" if col == "strategy" else "right")
    rows = [("llm (replayed strong-model transcript)", llm.scores["llm"]), (classical, cls.scores[classical])]
    for label, s in rows:
        ci = f"{s.score_ci95[0]:.2f}..{s.score_ci95[1]:.2f}" if s.score_ci95[0] is not None else "n/a (1 seed)"
        table.add_row(label, str(s.repeats), f"{s.score:.3f}", ci, f"{s.best_over_opt:.3f}",
                      f"{s.found_optimum:.0%}", f"{s.evals_to_2pct:.0f}" if s.evals_to_2pct is not None else "never")
    console.print(table)
    winner = max(rows, key=lambda r: r[1].score)[0]
    console.print(f"higher score: {winner}")
    console.print(f"report: {llm.report} (LLM run {llm.run_id}); {cls.report} (classical run {cls.run_id})")
    console.print(f"store: {STORE} (`kerntune store runs --store {STORE}`, `kerntune report RUN_ID --store {STORE}`)")


def gpu_path() -> None:
    kernel = ROOT / "examples/triton/matmul.py"
    strategy = "llm" if os.environ.get("KERNTUNE_LLM") else kerntune_default()
    console.print(f"[bold]kerntune demo: GPU path[/bold] (nvidia-smi works): tuning {kernel.relative_to(ROOT)} "
                  f"for real at 4096x4096x4096, strategy {strategy}"
                  + (f" with the model in $KERNTUNE_LLM" if strategy == "llm" else
                     " (set KERNTUNE_LLM to a model spec for the LLM-guided search)"))
    res = kerntune.tune(kernel=kernel, shape="4096x4096x4096", strategy=strategy, budget=30, seconds=90,
                        llm=os.environ.get("KERNTUNE_LLM"), store=STORE)
    table = Table(title="examples/triton/matmul.py at 4096^3, measured on this GPU")
    for col in ("winner config", "time ms", "evaluations", "speedup over the default config"):
        table.add_column(col)
    table.add_row(json.dumps(res.winner), f"{res.time_ms:.4g}" if res.time_ms else "none", str(res.trials),
                  f"{res.speedup:.3f}x" if res.speedup is not None else "n/a")
    console.print(table)
    console.print(f"run id: {res.run_id} (store {res.store}: `kerntune report {res.run_id} --store {res.store}`)\nreport: {res.report}")


def kerntune_default() -> str:
    from kerntune.strategies import DEFAULT_STRATEGY

    return DEFAULT_STRATEGY


def main() -> int:
    if has_nvidia_gpu() and os.environ.get("KERNTUNE_DEMO_PATH") != "replay":
        try:
            gpu_path()
            return 0
        except Exception as exc:  # noqa: BLE001 - a GPU without a working torch/Triton still gets a demo
            console.print(f"[yellow]GPU path failed ({type(exc).__name__}: {exc}); taking the replay path[/yellow]")
    replay_path()
    return 0


if __name__ == "__main__":
    sys.exit(main())
