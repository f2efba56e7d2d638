"""``tpe_on_failure`` (the forty-second pass): when one of a run's startup configs failed, Optuna's TPE
proposes up to evaluation N, then the engine is told everything and proposes the rest.  A real engine
and real Optuna on the synthetic recording (BM=128 with W=2 fails)."""

from __future__ import annotations

from pathlib import Path

from kerntune.strategies import Budget, BudgetExhausted
from kerntune.strategies.base import SearchContext
from kerntune.strategies.surrogate import SurrogateOptions, run
from tests.scripted import synthetic_evaluator, synthetic_time


def _run(tmp_path: Path, seed: int, **opts: object) -> tuple[SearchContext, list[str]]:
    ev = synthetic_evaluator(tmp_path)
    ctx = SearchContext(ev.space, ev, Budget(max_evals=30), seed=seed)
    sources: list[str] = []
    ctx.on_trial = lambda i, key, trial, clock, source: sources.append(source)
    try:
        run(ctx, SurrogateOptions(**opts))  # type: ignore[arg-type]
    except BudgetExhausted:  # how a strategy ends at its budget (run_search catches it)
        pass
    return ctx, sources


def _startup_failed(ctx: SearchContext, sources: list[str]) -> bool:
    return any(synthetic_time(t.config) is None for t, s in zip(ctx.history, sources) if s == "auto:startup")


def test_tpe_takes_over_until_n_only_when_a_startup_config_failed(tmp_path: Path) -> None:
    seen = set()
    for seed in range(14, 26):  # a startup config fails at three of these seeds
        ctx, sources = _run(tmp_path, seed, tpe_on_failure=15)
        keys = {ctx.space.key(ctx.space.canonical(t.config)) for t in ctx.history}
        assert len(ctx.history) == len(keys) == 30  # the whole budget, nothing measured twice
        start = sources.count("auto:startup")
        assert start >= 4 and all(s == "auto:startup" for s in sources[:start])  # a random draw may repeat the default
        failed = _startup_failed(ctx, sources)
        seen.add(failed)
        tpe = [s for s in sources if s.startswith("bayes")]
        assert (sources[start:15] == tpe and tpe) if failed else not tpe
        assert all(s.startswith("auto") for s in sources[15:])
    assert seen == {True, False}  # both branches were taken


def test_off_by_default(tmp_path: Path) -> None:
    for seed in range(4):
        _, sources = _run(tmp_path, seed)
        assert not any(s.startswith("bayes") for s in sources)
