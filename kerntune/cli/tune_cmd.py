"""``kerntune tune``: one strategy on one evaluator (a recorded space for now)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from kerntune.cli.common import console, err_console, open_store
from kerntune.errors import KerntuneError
from kerntune.evaluate import ReplayEvaluator
from kerntune.runner import run_search
from kerntune.space import jsonable
from kerntune.llm import LLMClient
from kerntune.strategies import LLM_STRATEGIES, Budget


def tune(
    replay: Path = typer.Option(..., "--replay", help="Recorded space to tune against (Kernel Tuner cache, T4, kerntune table)"),
    strategy: str = typer.Option("genetic", "--strategy", help="Strategy name"),
    budget: Optional[int] = typer.Option(100, "--budget", help="Maximum evaluations"),
    seconds: Optional[float] = typer.Option(None, "--seconds", help="Maximum tuning seconds on the evaluator's clock"),
    target_ms: Optional[float] = typer.Option(None, "--target-ms", help="Stop once a config is at least this fast"),
    seed: int = typer.Option(0, "--seed"),
    store: Optional[str] = typer.Option(None, "--store", help="SQLite store (default .kerntune/kerntune.db)"),
    resume: Optional[str] = typer.Option(None, "--resume", help="Continue a killed run by its id"),
    llm: Optional[str] = typer.Option(None, "--llm", envvar="KERNTUNE_LLM", help="Model for llm/llm-seeded (see README)"),
    llm_base_url: Optional[str] = typer.Option(None, "--llm-base-url", envvar="KERNTUNE_LLM_BASE_URL"),
    llm_timeout: float = typer.Option(300.0, "--llm-timeout", help="Seconds to wait for one model answer"),
    llm_transcript: Optional[Path] = typer.Option(None, "--llm-transcript",
                                                  help="Append every model exchange to this JSONL file (replayable)"),
    option: list[str] = typer.Option([], "--option", "-o", help="Strategy option NAME=JSON, e.g. -o initial=25"),
) -> None:
    """Search a space with one strategy, storing every trial."""
    if not replay.exists():
        raise KerntuneError(f"file not found: {replay}")
    evaluator = ReplayEvaluator.from_file(replay)
    st = open_store(store)
    b = Budget(max_evals=budget, max_seconds=seconds, target_ms=target_ms)
    if resume:
        run = st.get_run(resume)
        strategy, seed = run.strategy or strategy, run.seed if run.seed is not None else seed
        b = Budget(**run.options.get("budget", b.to_dict()))
        stored = {k: v for k, v in run.options.items() if k != "budget"}

    def progress(ctx) -> None:  # noqa: ANN001 - SearchContext
        if ctx.evaluations % 25 == 0:
            best = f"{ctx.best.time_ms:.4g} ms" if ctx.best else "none yet"
            err_console.print(f"[dim]{ctx.evaluations} evaluations, best {best}[/dim]")

    options = dict(stored) if resume else {}
    for item in option:
        key, sep, value = item.partition("=")
        if not sep:
            raise KerntuneError(f"--option {item!r}: expected NAME=VALUE")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    client = None
    if strategy in LLM_STRATEGIES:
        if not llm:
            raise KerntuneError(f"strategy {strategy} needs a model: pass --llm SPEC")
        client = LLMClient.from_spec(llm, llm_base_url, transcript=llm_transcript, timeout=llm_timeout)
    res = run_search(evaluator, strategy, b, seed, store=st, run_id=resume, progress=progress, llm=client,
                     options=options)
    for note in res.notes:
        err_console.print(f"[yellow]note:[/yellow] {note}")
    if res.best is None:
        console.print(f"no successful config in {len(res.history)} evaluations ({res.stop_reason})")
    else:
        cfg = json.dumps({k: jsonable(v) for k, v in res.best.config.items()})
        console.print(f"best: {res.best.time_ms:.6g} ms after {len(res.history)} evaluations "
                      f"({res.stop_reason}); config {cfg}")
    console.print(f"run id: {res.run_id} (store {st.path})")
    st.close()
