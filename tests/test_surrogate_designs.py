"""The seventeenth pass's opt-in designs of ``auto``'s engine (``surrogate_designs``): off by default,
they run, stay deterministic and find the synthetic optimum; their pieces do what they say."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kerntune.errors import KerntuneError
from kerntune.run.search import RunOptions, run_search
from kerntune.strategies import Budget
from kerntune.strategies.surrogate_designs import TrustRegion, _percentile
from kerntune.strategies.surrogate_options import SurrogateOptions
from tests.scripted import synthetic_evaluator

OPT = {"BM": 64, "W": 4, "bs": (32, 32)}


def test_percentile_ranks_with_ties() -> None:
    r = _percentile(np.array([3.0, 1.0, 2.0, 1.0]))
    assert r[1] == r[3] < r[2] < r[0]
    assert np.all((r > 0) & (r < 1))


def test_the_trust_region_narrows_on_failure_widens_on_success_and_collapses() -> None:
    tr = TrustRegion(4, 8, SurrogateOptions(tr=True))
    assert (tr.init, tr.fail_tol, tr.radius) == (4, 2, 4)
    assert not tr.update(False) and not tr.update(False) and tr.radius == 3
    assert not tr.update(True) and not tr.update(True) and tr.radius == 4  # two gains widen it
    collapsed = [tr.update(False) for _ in range(8)]
    assert collapsed[-1] and not any(collapsed[:-1]) and tr.radius == 4 and tr.collapses == 1
    pool = np.array([[0, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 1]])
    tr.radius = 2
    assert tr.outside(pool, np.zeros(4)).tolist() == [False, False, True]


@pytest.mark.parametrize("options", [{"fuse": "rank_max"}, {"fuse": "rank_sum"}, {"fuse": "pi_prod", "fuse_local": False}, {"fuse": "twin", "fuse_until": 30}, {"fuse": "disagree", "fuse_share": 0.5},
                                     {"tr": True, "stall": 8}, {"tabu_kernel": 0.5, "stall": 8}, {"certify": True, "stall": 8}])
def test_the_designs_run_deterministically_and_find_the_optimum(tmp_path: Path, options: dict) -> None:
    ev = synthetic_evaluator(tmp_path)
    a = run_search(ev, "auto", Budget(max_evals=60), seed=3, run=RunOptions(strategy_options=options))
    b = run_search(ev, "auto", Budget(max_evals=60), seed=3, run=RunOptions(strategy_options=options))
    assert len(a.history) == 60
    assert [t.config for t in a.history] == [t.config for t in b.history]
    assert a.best is not None and a.best.config == OPT


def test_an_unknown_fusion_rule_is_refused() -> None:
    with pytest.raises(KerntuneError, match="fuse"):
        SurrogateOptions(fuse="mean")


def test_the_kernel_tabu_closes_what_the_fit_calls_the_same_basin() -> None:
    from kerntune.strategies.gp_model import _GP
    from kerntune.strategies.surrogate_designs import kernel_tabu

    gp = _GP(3, 10)
    gp.theta = np.array([2.0, 0.1, 0.1])  # field 0 matters, the others barely
    gp.add_pool(np.array([[0, 0, 0], [0, 1, 1], [1, 0, 0], [1, 1, 1]], dtype=float))
    assert kernel_tabu(gp, [np.zeros(3)], 0.5).tolist() == [True, True, False, False]
