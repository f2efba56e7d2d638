"""``kerntune space prune`` and ``kerntune space evaluate``: an LLM (or the rule
pruner) edits a recorded space; TR, PR and WC judge the result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from kerntune.cli.common import console, open_store
from kerntune.errors import KerntuneError
from kerntune.evaluate import ReplayEvaluator
from kerntune.prune import evaluate_pruner, llm_pruner, prune_once, rule_pruner
from kerntune.prune.edits import apply_edits
from kerntune.prune.pruners import Pruner


def _pruner(llm: Optional[str], rule: bool, llm_base_url: Optional[str], timeout: float) -> Pruner:
    if rule == bool(llm):
        raise KerntuneError("choose a pruner: --llm SPEC or --rule")
    if rule:
        return rule_pruner()
    from kerntune.llm import LLMClient

    return llm_pruner(LLMClient.from_spec(llm, llm_base_url, timeout=timeout))  # type: ignore[arg-type]


def _evaluator(space: Path) -> ReplayEvaluator:
    if not space.exists():
        raise KerntuneError(f"file not found: {space}")
    return ReplayEvaluator.from_file(space)


def prune(space: Path = typer.Option(..., "--space", help="Recorded space (Kernel Tuner cache, T4, kerntune table)"),
          llm: Optional[str] = typer.Option(None, "--llm", envvar="KERNTUNE_LLM", help="Model that edits the space"),
          rule: bool = typer.Option(False, "--rule", help="The rule pruner instead of a model"),
          profile: Optional[str] = typer.Option(None, "--profile", help="A stored run whose trials are the profile"),
          profile_size: int = typer.Option(40, "--profile-size", help="Configs measured as the profile when no --profile"),
          seed: int = typer.Option(0, "--seed"),
          output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write the pruned space (JSON) here"),
          store: Optional[str] = typer.Option(None, "--store"),
          llm_base_url: Optional[str] = typer.Option(None, "--llm-base-url", envvar="KERNTUNE_LLM_BASE_URL"),
          llm_timeout: float = typer.Option(300.0, "--llm-timeout")) -> None:
    """Let a model (or the rule pruner) remove values and pin parameters; print the diff."""
    ev = _evaluator(space)
    pruner = _pruner(llm, rule, llm_base_url, llm_timeout)
    if output is not None and output.resolve() == space.resolve():
        raise KerntuneError("--output must not be the input file (it is never modified in place)")
    if profile:
        st = open_store(store)
        prof = [t for _, t, _ in st.trials(profile)]
        if not prof:
            raise KerntuneError(f"run {profile} has no trials to use as a profile")
        edits, llm_s, note = pruner(ev.space, prof, ev.workload(), ev.device())
        outcome = apply_edits(ev.space, edits)
    else:
        outcome, run = prune_once(ev, pruner, profile_size, seed)
        llm_s, note = run.llm_s, run.note
    console.print(outcome.diff(ev.space))
    if note:
        console.print(f"[yellow]note:[/yellow] {note}")
    if llm_s:
        console.print(f"model time: {llm_s:.1f} s")
    if output is not None:
        data = outcome.space.to_dict()
        data["edits"] = [e.to_dict() for e in outcome.applied]
        data["pruned_from"] = str(space)
        output.write_text(json.dumps(data, indent=1))
        console.print(f"pruned space -> {output}")


def evaluate(space: Path = typer.Option(..., "--space", help="Recorded space"),
             llm: Optional[str] = typer.Option(None, "--llm", envvar="KERNTUNE_LLM"),
             rule: bool = typer.Option(False, "--rule", help="The rule pruner instead of a model"),
             runs: int = typer.Option(5, "--runs", help="Independent prunings (profile seeds)"),
             profile_size: int = typer.Option(40, "--profile-size"),
             seed: int = typer.Option(0, "--seed"),
             json_out: Optional[Path] = typer.Option(None, "--json", help="Write every run's numbers here"),
             llm_base_url: Optional[str] = typer.Option(None, "--llm-base-url", envvar="KERNTUNE_LLM_BASE_URL"),
             llm_timeout: float = typer.Option(300.0, "--llm-timeout")) -> None:
    """TR, PR and WC of pruning against the full space, LLM time counted in TR."""
    if runs < 1:
        raise KerntuneError(f"--runs must be at least 1, got {runs}")
    ev = _evaluator(space)
    summary = evaluate_pruner(ev, _pruner(llm, rule, llm_base_url, llm_timeout), runs, profile_size, seed)
    s = summary.table()
    table = Table(title=f"{space.name}: {runs} prunings, profile {profile_size}")
    for col in ("pruner", "TR", "PR", "PR min", "WC", "configs kept", "LLM s"):
        table.add_column(col, justify="right")
    table.add_row("rule" if rule else str(llm), f"{s['TR']:.3f}", f"{s['PR']:.3f}", f"{s['PR_min']:.3f}",
                  f"{s['WC']:.2f}", f"{s['kept']:.1%}", f"{s['llm_s']:.1f}")
    console.print(table)
    if json_out is not None:
        json_out.write_text(json.dumps({"space": str(space), "pruner": "rule" if rule else llm, "runs": runs,
                                        "profile_size": profile_size, "seed": seed, **summary.to_dict()}, indent=1))
        console.print(f"numbers: {json_out}")
