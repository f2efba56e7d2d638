"""``fail_block`` (the thirty-ninth pass): the failure indicator of every measured config is kriged with
the main GP's kernel, and configs more likely to fail than ``fail_block`` are left out of the GP's steps.
A real engine on the synthetic recording, whose BM=128 / W=2 configs fail."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

from kerntune.strategies import Budget
from kerntune.strategies.base import SearchContext
from kerntune.strategies.surrogate import SurrogateOptions, SurrogateSearch
from tests.scripted import synthetic_evaluator, synthetic_time


def _told(tmp_path: Path, failures: int, **opts: object) -> SurrogateSearch:
    """An engine told 14 working configs and ``failures`` failing ones."""
    ev = synthetic_evaluator(tmp_path)
    ctx = SearchContext(ev.space, ev, Budget(max_evals=60), seed=0)
    engine = SurrogateSearch(ctx, SurrogateOptions(climb_share=0.0, **opts))  # type: ignore[arg-type]
    configs = list(ev.space.enumerate())
    ok = random.Random(1).sample([c for c in configs if synthetic_time(c) is not None], 14)
    bad = random.Random(2).sample([c for c in configs if synthetic_time(c) is None], failures)
    engine.tell(ok + bad, ctx.evaluate(ok + bad))
    engine.since_fit = engine.opts.refit_every  # the next step refits, and the failure model takes its kernel
    return engine


def test_likely_failures_are_the_failing_region_and_none_before_a_failure(tmp_path: Path) -> None:
    assert _told(tmp_path, 0, fail_block=0.5)._likely_failures() is None  # nothing failed: nothing left out
    assert _told(tmp_path, 4, fail_block=None)._likely_failures() is None  # the option off: the same
    engine = _told(tmp_path, 4, fail_block=0.5)
    engine._refit(engine._normalised())
    flagged = engine._likely_failures()
    assert flagged is not None
    fails = np.array([synthetic_time(c) is None for c in engine.configs])
    unmeasured = ~np.array(engine.measured)
    # most unmeasured failing configs are flagged, and few working ones
    assert flagged[fails & unmeasured].mean() >= 0.6
    assert flagged[~fails & unmeasured].mean() <= 0.1


def test_the_gp_steps_take_no_flagged_config(tmp_path: Path) -> None:
    engine = _told(tmp_path, 4, fail_block=0.5)
    picks = engine._gp_propose(20, set())
    flagged = engine._likely_failures()
    assert flagged is not None and len(picks) == 20
    assert not any(flagged[engine.index[engine.ctx.space.key(c)]] for c in picks)
