"""The thirty-first design pass's TPE member (``surrogate_tpe.py``, option ``tpe_share``): a share of the
engine's non-climber steps is a TPE proposal over the pool of valid configs."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

from kerntune.run.search import RunOptions, run_search
from kerntune.strategies import Budget
from kerntune.strategies.base import SearchContext
from kerntune.strategies.surrogate import SurrogateOptions, SurrogateSearch
from tests.scripted import synthetic_evaluator, synthetic_time


def _engine(tmp_path: Path, seed: int = 0, **opts: object) -> SurrogateSearch:
    ev = synthetic_evaluator(tmp_path)
    ctx = SearchContext(ev.space, ev, Budget(max_evals=100), seed=seed)
    engine = SurrogateSearch(ctx, SurrogateOptions(climb_share=0.0, **opts))  # type: ignore[arg-type]
    sample = random.Random(3).sample(list(ev.space.enumerate()), 16)
    engine.tell(sample, ctx.evaluate(sample))
    return engine


def test_tpe_picks_are_unmeasured_and_lean_towards_the_good_values(tmp_path: Path) -> None:
    picks, free = [], None
    for seed in range(12):
        engine = _engine(tmp_path, seed=seed)
        blocked = np.array(engine.measured, dtype=bool)
        i = engine.tpe_pick(blocked)
        assert i is not None and not blocked[i]
        picks.append(engine.configs[i])
        free = [engine.configs[j] for j in np.flatnonzero(~blocked)]
    times = [synthetic_time(c) or 10.0 for c in picks]
    everywhere = [synthetic_time(c) or 10.0 for c in free]
    # the good density holds the bowl's floor: the picks are much better than an unmeasured config drawn at random
    assert np.mean(times) < np.mean(everywhere) - 1.0


def test_tpe_share_one_proposes_only_tpe_steps_and_credits_them(tmp_path: Path) -> None:
    engine = _engine(tmp_path, tpe_share=1.0)
    batch = engine.propose(3)
    space = engine.ctx.space
    keys = {space.key(space.canonical(c)) for c in batch}
    assert len(keys) == 3 and not keys & set(engine.ctx.measured)
    assert engine.steps["tpe"] == 3 and engine.steps["gp"] == 0
    engine.tell(batch, engine.ctx.evaluate(batch))
    assert not any(k in engine.owner for k in keys)  # each proposal's gain went to its member's credit


def test_a_run_with_the_tpe_member_spends_its_budget_on_distinct_valid_configs(tmp_path: Path) -> None:
    ev = synthetic_evaluator(tmp_path)
    res = run_search(ev, "auto", Budget(max_evals=30), seed=1, run=RunOptions(strategy_options={"tpe_share": 0.5}))
    keys = [ev.space.key(t.config) for t in res.history]
    assert len(res.history) == 30 and len(set(keys)) == 30
    assert res.best is not None and res.best.time_ms <= 1.4  # within 0.4 ms of the bowl's floor (1.0) after 30 of 108
