"""The eighteenth design pass's options (``SurrogateOptions.global_warp``, ``global_fit``,
``global_share``; the default since the twenty-fifth pass): the GP's global steps predict from other
targets than its fit and its local steps."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from kerntune.errors import KerntuneError
from kerntune.run.search import RunOptions, run_search
from kerntune.strategies import Budget
from kerntune.strategies.base import SearchContext
from kerntune.strategies.surrogate import SurrogateOptions, SurrogateSearch
from tests.scripted import synthetic_evaluator, synthetic_time


def _engine(tmp_path: Path, **opts: object) -> tuple[SurrogateSearch, object]:
    ev = synthetic_evaluator(tmp_path)
    ctx = SearchContext(ev.space, ev, Budget(max_evals=100), seed=0)
    base: dict[str, object] = {"global_warp": None, "global_fit": False, "global_share": 1.0}  # each test names what it turns on
    engine = SurrogateSearch(ctx, SurrogateOptions(climb_share=0.0, **{**base, **opts}))  # type: ignore[arg-type]
    ok = [c for c in ev.space.enumerate() if synthetic_time(c) is not None]
    sample = random.Random(3).sample(ok, 12)  # a history where the log-time and the rank LCBs pick differently
    engine.tell(sample, ctx.evaluate(sample))
    return engine, ev.space


def _argmin(engine: SurrogateSearch, mu: np.ndarray, sd: np.ndarray, allowed: np.ndarray | None = None) -> int:
    score = mu - engine.opts.kappa * sd
    score[np.array(engine.measured) | engine.tabu_mask] = np.inf
    if allowed is not None:
        score[~allowed] = np.inf
    return int(np.argmin(score))


def test_global_steps_predict_from_global_warp_and_the_fit_stays_the_ranks(tmp_path: Path) -> None:
    default, space = _engine(tmp_path, local_share=0.0)
    engine, _ = _engine(tmp_path, local_share=0.0, global_warp="log")
    picks = {name: e.index[space.key(e._gp_propose(1, set())[0])] for name, e in (("rank", default), ("log", engine))}
    # the same fit (copula targets) in both engines: only the targets of the prediction differ
    assert np.array_equal(engine.model.theta, default.model.theta) and np.array_equal(engine.model.kind, default.model.kind)
    by_log = _argmin(engine, *engine.model.predict(engine._targets("log")))
    by_rank = _argmin(engine, *engine.model.predict(engine._targets("copula")))
    assert by_log != by_rank  # the history tells the two apart
    assert picks == {"rank": by_rank, "log": by_log}


def test_local_steps_keep_the_rank_targets_under_global_warp(tmp_path: Path) -> None:
    engine, space = _engine(tmp_path, local_share=1.0, global_warp="log")
    centre = engine.region.best_config
    near = np.zeros(len(engine.configs), dtype=bool)
    near[[engine.index[k] for k in map(space.key, space.neighbours(centre, "hamming")) if k in engine.index]] = True
    pick = engine.index[space.key(engine._gp_propose(1, set())[0])]
    assert pick == _argmin(engine, *engine.model.predict(engine._targets("copula")), near)


def test_global_fit_keeps_a_second_gp_fitted_on_the_global_targets(tmp_path: Path) -> None:
    engine, space = _engine(tmp_path, local_share=0.0, global_warp="log", global_fit=True)
    assert engine.gmodel is not None and engine.gmodel is not engine.model and engine.gmodel.n == engine.model.n == 12
    pick = engine.index[space.key(engine._gp_propose(1, set())[0])]
    assert engine.gmodel.theta.any()  # refitted with the main GP
    assert pick == _argmin(engine, *engine.gmodel.predict(engine._targets("log")))


def test_the_default_splits_the_global_steps_and_only_for_the_gp() -> None:
    assert SurrogateOptions().global_split and SurrogateOptions().global_fit and SurrogateOptions().global_share == 0.5
    assert not SurrogateOptions(global_warp="copula").global_split  # the same targets as the fit: nothing to split
    assert not SurrogateOptions(y_warp="log").global_split
    assert not SurrogateOptions(global_warp=None).global_split
    with pytest.raises(KerntuneError, match="global_warp"):
        SurrogateOptions(global_warp="logs")


def test_the_default_engine_keeps_a_second_gp_and_a_forest_does_not(tmp_path: Path) -> None:
    ev = synthetic_evaluator(tmp_path)
    ctx = SearchContext(ev.space, ev, Budget(max_evals=100), seed=0)
    assert SurrogateSearch(ctx, SurrogateOptions()).gmodel is not None
    assert SurrogateSearch(ctx, SurrogateOptions(global_fit=False)).gmodel is None
    pytest.importorskip("sklearn")
    assert SurrogateSearch(ctx, SurrogateOptions(model="rf")).gmodel is None


@pytest.mark.parametrize("opts", [
    {"global_warp": "log"}, {"global_warp": "log", "global_fit": True, "batch_size": 3},
    {"global_warp": "log", "global_share": 0.5, "local_share": 0.5},
])
def test_global_options_run_through_auto(tmp_path: Path, opts: dict) -> None:
    ev = synthetic_evaluator(tmp_path)
    res = run_search(ev, "auto", Budget(max_evals=40), seed=1, run=RunOptions(strategy_options=opts))
    assert len(res.history) == 40 and res.best is not None
