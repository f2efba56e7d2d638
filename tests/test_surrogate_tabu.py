"""The engine's tabu after a restart (``SurrogateSearch._restart``) and ``tabu_until`` (the
twenty-seventh pass's, default 0.5 since the thirty-sixth): a real engine on the synthetic recording,
its restart forced, its global steps read."""

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


def _bound_argmin(engine: SurrogateSearch) -> int:
    """The pool index of the LCB's argmin over every unmeasured config, tabu or not."""
    yn = engine._normalised()
    engine._refit(yn)
    mu, sd = engine.model.predict(yn)
    score = mu - engine.opts.kappa * sd
    score[np.array(engine.measured)] = np.inf
    return int(np.argmin(score))


def _global_pick(engine: SurrogateSearch) -> int:
    """The pool index of the engine's next global step."""
    return engine.index[engine.ctx.space.key(engine._gp_propose(1, set())[0])]


def _ball_only(engine: SurrogateSearch) -> None:
    """Measured-mark everything outside the tabu ball, so that a global step must pick inside it or nothing."""
    for i, closed in enumerate(engine.tabu_mask):
        if not closed:
            engine.measured[i] = True


def test_the_tabu_closes_the_ball_to_global_steps_and_yields_when_nothing_else_is_left(tmp_path: Path) -> None:
    closed, _ = _restarted(tmp_path, tabu_until=None)
    assert closed.tabu_mask.sum() > 1
    # this history's best bound lies in the ball, and the global step does not take it
    best_anywhere = _bound_argmin(closed)
    pick = _global_pick(closed)
    assert closed.tabu_mask[best_anywhere] and pick != best_anywhere and not closed.tabu_mask[pick]

    # every config is either measured or tabu: the tabu yields rather than stop the search
    engine, _ = _restarted(tmp_path)
    _ball_only(engine)
    pick = engine._gp_propose(1, set())
    assert pick and engine.tabu_mask[engine.index[engine.ctx.space.key(pick[0])]]


def test_tabu_until_lifts_the_balls_only_past_its_share_of_the_evaluation_budget(tmp_path: Path) -> None:
    engine, _ = _restarted(tmp_path)                    # the default, 0.5: 12 of 40 evaluations spent, closed
    assert engine.opts.tabu_until == 0.5 and not engine._tabu_lifted()
    engine, _ = _restarted(tmp_path, tabu_until=None)  # never lifted
    assert not engine._tabu_lifted()
    engine, _ = _restarted(tmp_path, tabu_until=0.25)  # past a quarter of the budget: lifted
    assert engine._tabu_lifted()


def test_a_lifted_tabu_lets_the_global_steps_back_into_the_ball(tmp_path: Path) -> None:
    lifted, _ = _restarted(tmp_path, tabu_until=0.25)
    best = _bound_argmin(lifted)
    assert _global_pick(lifted) == best  # the LCB's argmin over every unmeasured config, tabu or not
    closed, _ = _restarted(tmp_path, tabu_until=None)
    best = _bound_argmin(closed)
    assert closed.tabu_mask[best] and _global_pick(closed) != best  # the best bound lies in the ball: closed to the step
