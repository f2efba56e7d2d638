"""The thirty-fourth design pass's ``climb_cap_after``: the climber's cap (``climb_max``) applies only once
that many configs were measured, so the first steps after the start share the climber's prior share."""

from __future__ import annotations

import random
from pathlib import Path

from kerntune.strategies import Budget
from kerntune.strategies.base import SearchContext
from kerntune.strategies.surrogate import SurrogateOptions, SurrogateSearch
from tests.scripted import synthetic_evaluator


def _engine(tmp_path: Path, told: int, **opts: object) -> SurrogateSearch:
    ev = synthetic_evaluator(tmp_path)
    ctx = SearchContext(ev.space, ev, Budget(max_evals=100), seed=0)
    engine = SurrogateSearch(ctx, SurrogateOptions(**opts))  # type: ignore[arg-type]
    sample = random.Random(3).sample(list(ev.space.enumerate()), told)
    engine.tell(sample, ctx.evaluate(sample))
    return engine


def test_the_climbers_cap_waits_for_climb_cap_after_measurements(tmp_path: Path) -> None:
    assert _engine(tmp_path, 12).climb_probability() == 0.15  # the default: capped from the start
    early = _engine(tmp_path, 12, climb_cap_after=20)
    assert early.climb_probability() == 0.5  # the prior share (no member has credit yet), uncapped
    assert _engine(tmp_path, 20, climb_cap_after=20).climb_probability() == 0.15
