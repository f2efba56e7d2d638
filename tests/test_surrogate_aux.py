"""The engine's target warps and options (``kerntune/strategies/surrogate_aux.py``, ``SurrogateOptions``): the
warps keep the order of the times, and each option runs through ``auto`` on a recording."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kerntune.run.search import RunOptions, run_search
from kerntune.strategies import Budget
from kerntune.strategies.surrogate_aux import warp
from tests.scripted import synthetic_evaluator


@pytest.mark.parametrize("how", ["copula", "blend", "clip"])
def test_warps_keep_the_order_of_the_times(how: str) -> None:
    y = np.log(np.array([1.0, 1.001, 1.5, 3.0, 20.0, 1.5, 2.0]))
    w = warp(y, how)
    order = np.argsort(y, kind="stable")
    assert np.all(np.diff(w[order]) >= -1e-12)
    assert w[0] < w[1] or how == "clip"
    if how == "copula":
        assert w[2] == w[5]  # ties share their rank
        assert abs(w.mean()) < 0.2  # normal scores are centred


def test_an_unknown_warp_is_refused() -> None:
    with pytest.raises(ValueError, match="y_warp"):
        warp(np.arange(5.0), "cube")


@pytest.mark.parametrize("opts", [
    {"y_warp": "copula"}, {"y_warp": "blend"}, {"y_warp": "clip", "y_clip": 0.3}, {"startup": 8},
    {"gp_ordinal": 1.0}, {"gp_ordinal": 0.5, "climb_max": 0.15},
    {"gp_ordinal": 1.0, "gp_ordinal_fit": True},
])
def test_each_option_runs_through_auto(tmp_path: Path, opts: dict) -> None:
    ev = synthetic_evaluator(tmp_path)
    res = run_search(ev, "auto", Budget(max_evals=40), seed=1, run=RunOptions(strategy_options=opts))
    assert len(res.history) == 40 and res.best is not None


def test_the_ordinal_kernel_orders_neighbours_and_stays_positive_definite() -> None:
    """``gp_ordinal``: along an ordered field, adjacent values correlate as under Hamming and far ones
    less; an unordered field stays Hamming; alpha 0 is the Hamming kernel itself."""
    from kerntune.space import Choice, Space
    from kerntune.strategies.gp_model import _GP, _encode, ordinal_steps

    space = Space([Choice("BLOCK", options=(16, 32, 64, 128, 256)), Choice("LAYOUT", options=("row", "col", "tile"))])
    steps = ordinal_steps(space)
    assert list(steps) == [4.0, 0.0]
    cfgs = [{"BLOCK": b, "LAYOUT": lay} for b in (16, 32, 64, 128, 256) for lay in ("row", "col", "tile")]
    x = _encode(space, cfgs)
    ham, ordl = _GP(2, 20), _GP(2, 20, steps=steps, alpha=1.0)
    ham.theta = ordl.theta = np.array([0.6, 0.6])
    k_ham, k_ord = ham.kernel(x, x), ordl.kernel(x, x)
    # BLOCK 16 against 32 (adjacent) and against 256 (far), same layout
    assert k_ord[0, 3] == pytest.approx(k_ham[0, 3])
    assert k_ord[0, 12] < k_ord[0, 3] and k_ham[0, 12] == pytest.approx(k_ham[0, 3])
    assert k_ord[0, 1] == pytest.approx(k_ham[0, 1])  # the unordered field: a mismatch either way
    assert np.linalg.eigvalsh(k_ord).min() > 0
    assert np.array_equal(_GP(2, 20, steps=steps, alpha=0.0).steps, np.zeros(2))
