"""The engine's tabu after a restart (``SurrogateSearch._restart``): a real engine on the synthetic
recording, its restart forced, its global steps read.  (The twenty-seventh pass's ``tabu_until``, which
lifted the tabu late, was not adopted; its tests are at commit 6103a51.)"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

from kerntune.strategies import Budget
from kerntune.strategies.base import SearchContext
from kerntune.strategies.surrogate import SurrogateOptions, SurrogateSearch
from tests.scripted import synthetic_evaluator, synthetic_time


def _restarted(tmp_path: Path, **opts: object) -> tuple[SurrogateSearch, SearchContext]:
    """An engine told 12 configs, then restarted: its incumbent's two-field ball is tabu."""
    ev = synthetic_evaluator(tmp_path)
    ctx = SearchContext(ev.space, ev, Budget(max_evals=40), seed=0)
    engine = SurrogateSearch(ctx, SurrogateOptions(climb_share=0.0, local_share=0.0, **opts))  # type: ignore[arg-type]
    ok = [c for c in ev.space.enumerate() if synthetic_time(c) is not None]
    sample = random.Random(3).sample(ok, 12)
    engine.tell(sample, ctx.evaluate(sample))
    engine._restart()
    engine._restart_pending = False  # the next global step is an ordinary one
    return engine, ctx


def _ball_only(engine: SurrogateSearch) -> None:
    """Measured-mark everything outside the tabu ball, so that a global step must pick inside it or nothing."""
    for i, closed in enumerate(engine.tabu_mask):
        if not closed:
            engine.measured[i] = True


def test_the_tabu_closes_the_ball_to_global_steps_and_yields_when_nothing_else_is_left(tmp_path: Path) -> None:
    closed, _ = _restarted(tmp_path)
    assert closed.tabu_mask.sum() > 1
    # this history's best bound lies in the ball, and the global step does not take it
    yn = closed._normalised()
    closed._refit(yn)
    mu, sd = closed.model.predict(yn)
    score = mu - closed.opts.kappa * sd
    score[np.array(closed.measured)] = np.inf
    best_anywhere = int(np.argmin(score))
    pick = closed.index[closed.ctx.space.key(closed._gp_propose(1, set())[0])]
    assert closed.tabu_mask[best_anywhere] and pick != best_anywhere and not closed.tabu_mask[pick]

    # every config is either measured or tabu: the tabu yields rather than stop the search
    engine, _ = _restarted(tmp_path)
    _ball_only(engine)
    pick = engine._gp_propose(1, set())
    assert pick and engine.tabu_mask[engine.index[engine.ctx.space.key(pick[0])]]
