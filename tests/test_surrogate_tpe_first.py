"""``tpe_first`` (the forty-first pass): Optuna's TPE proposes a run's first N evaluations, then the
engine is told all of them and proposes the rest.  A real engine and real Optuna on the synthetic
recording."""

from __future__ import annotations

from pathlib import Path

from kerntune.strategies import Budget, BudgetExhausted
from kerntune.strategies.base import SearchContext
from kerntune.strategies.surrogate import SurrogateOptions, run
from tests.scripted import synthetic_evaluator


def _run(tmp_path: Path, **opts: object) -> tuple[SearchContext, list[str]]:
    ev = synthetic_evaluator(tmp_path)
    ctx = SearchContext(ev.space, ev, Budget(max_evals=30), seed=3)
    sources: list[str] = []
    ctx.on_trial = lambda i, key, trial, clock, source: sources.append(source)
    try:
        run(ctx, SurrogateOptions(**opts))  # type: ignore[arg-type]
    except BudgetExhausted:  # how a strategy ends at its budget (run_search catches it)
        pass
    return ctx, sources


def test_tpe_proposes_the_first_evaluations_then_the_engine_the_rest(tmp_path: Path) -> None:
    ctx, sources = _run(tmp_path, tpe_first=12)
    keys = {ctx.space.key(ctx.space.canonical(t.config)) for t in ctx.history}
    assert len(ctx.history) == len(keys) == 30  # the whole budget, nothing measured twice
    assert all(s.startswith("bayes") for s in sources[:12])
    assert sources[12:] and all(s.startswith("auto") for s in sources[12:])
    assert ctx.stop_reason == "evaluation budget"  # the phase's own end is not the run's


def test_without_it_the_engine_proposes_every_evaluation(tmp_path: Path) -> None:
    ctx, sources = _run(tmp_path)
    assert len(sources) == 30 and not any(s.startswith("bayes") for s in sources)
