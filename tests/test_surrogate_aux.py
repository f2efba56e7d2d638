"""The sixth design pass's engine options (``kerntune/strategies/surrogate_aux.py``): the target
warps keep the order of the times, and each option runs through ``auto`` on a recording."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kerntune.run.search import RunOptions, run_search
from kerntune.strategies import Budget
from kerntune.strategies.surrogate_aux import maximin_pick, subspace_best, warp
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


def test_subspace_best_keeps_the_fixed_fields() -> None:
    pool = np.array([[0, 0, 0], [0, 1, 1], [1, 1, 0], [0, 1, 0]], dtype=float)
    free = np.array([False, True, True])
    measured = np.array([True, False, False, False])
    score = np.array([-9.0, 1.0, -5.0, 0.5])
    assert subspace_best(pool, free, pool[0], measured, lambda: score) == 3  # row 2 changes a fixed field
    assert subspace_best(pool, np.zeros(3, bool), pool[0], measured, lambda: score) is None


@pytest.mark.parametrize("opts", [
    {"y_warp": "copula"}, {"y_warp": "blend", "local_warp": "copula"}, {"noise": 1e-5},
    {"lead_climb": 0.15, "lead_perturb": True, "lead_stall": 10}, {"late_climb": 0.15},
    {"perturb_lcb": 1.0}, {"credit_mean": True},
    {"startup_design": "maximin"}, {"startup_design": "spread", "startup": 8}, {"startup_default": False},
    {"early_kappa": 1.0, "early_until": 15}, {"gp_ordinal": 1.0}, {"gp_ordinal": 0.5, "climb_max": 0.15},
    {"gp_ordinal": 1.0, "gp_ordinal_fit": True},
])
def test_each_option_runs_through_auto(tmp_path: Path, opts: dict) -> None:
    ev = synthetic_evaluator(tmp_path)
    res = run_search(ev, "auto", Budget(max_evals=40), seed=1, run=RunOptions(strategy_options=opts))
    assert len(res.history) == 40 and res.best is not None


def test_maximin_pick_takes_the_farthest_candidates() -> None:
    """Twelfth pass: each pick differs from everything chosen before in as many fields as possible."""
    names = ["a", "b", "c"]
    cands = [{"a": 0, "b": 0, "c": 1}, {"a": 1, "b": 1, "c": 1}, {"a": 1, "b": 1, "c": 0}, {"a": 0, "b": 1, "c": 0}]
    picks = maximin_pick(names, [{"a": 0, "b": 0, "c": 0}], cands, 2)
    assert picks[0] == {"a": 1, "b": 1, "c": 1}  # 3 fields from the default
    assert picks[1] == cands[0]  # every other candidate is 1 field from one of the two: a tie, the first wins
    assert maximin_pick(names, [], cands, 1) == [cands[0]]  # nothing chosen: the first candidate


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


def test_the_fitted_nugget_grows_with_the_noise_in_the_targets() -> None:
    """Fourteenth pass (``noise_fit``): the marginal likelihood picks the nugget from the grid at each
    refit, small for targets that a smooth function explains, larger when they scatter; with no grid
    the nugget stays as given; predictions at the measured points follow the targets less when the
    nugget is larger."""
    from kerntune.strategies.gp_model import _GP

    rng = np.random.default_rng(0)
    x = rng.integers(0, 4, size=(60, 3)).astype(float)
    smooth = (x[:, 0] == 1).astype(float) - 0.5 * (x[:, 1] == 2)
    noisy = smooth + rng.normal(0.0, 0.8, size=60)
    fits = {}
    for name, y in (("smooth", smooth), ("noisy", noisy)):
        yn = (y - y.mean()) / y.std()
        gp = _GP(3, 60, noise_grid=(1e-3, 1e-2, 0.1, 0.3, 1.0))
        gp.add_pool(x)
        for row in x:
            gp.add_obs(row)
        gp.refit(yn, np.ones(3, bool))
        fits[name] = gp.noise
        mu, _ = gp.predict(yn)
        # the rank-one updates and the rebuild after the refit agree
        fresh = _GP(3, 60, noise=gp.noise)
        fresh.theta, fresh.kind = gp.theta, gp.kind
        fresh.add_pool(x)
        for row in x:
            fresh.add_obs(row)
        assert np.allclose(fresh.predict(yn)[0], mu, atol=1e-6)
    assert fits["smooth"] < fits["noisy"]
    fixed = _GP(3, 60, noise=1e-3)
    fixed.add_pool(x)
    for row in x:
        fixed.add_obs(row)
    fixed.refit((noisy - noisy.mean()) / noisy.std(), np.ones(3, bool))
    assert fixed.noise == 1e-3


def test_the_fourteenth_pass_options_run_through_auto(tmp_path: Path) -> None:
    ev = synthetic_evaluator(tmp_path)
    base = run_search(ev, "auto", Budget(max_evals=40), seed=1)
    for opts in ({"noise_fit": [1e-3, 1e-2, 0.1]}, {"alt_warp": "log", "alt_share": 0.5}, {"fit_warp": "log"},
                 {"twin_share": 0.5}, {"twin_choose": True}, {"twin_choose": True, "twin_warp": "copula", "twin_ordinal": 1.0},
                 {"theta_max": 0.3}):
        res = run_search(ev, "auto", Budget(max_evals=40), seed=1, run=RunOptions(strategy_options=opts))
        again = run_search(ev, "auto", Budget(max_evals=40), seed=1, run=RunOptions(strategy_options=opts))
        assert len(res.history) == 40 and res.best is not None
        assert [t.config for t in res.history] == [t.config for t in again.history]  # deterministic
    # off by default: the options' neutral values leave the default's run as it was
    same = run_search(ev, "auto", Budget(max_evals=40), seed=1,
                      run=RunOptions(strategy_options={"noise_fit": [], "alt_share": 0.0, "twin_share": 0.0}))
    assert [t.config for t in same.history] == [t.config for t in base.history]


def test_theta_max_caps_the_length_scale_grid() -> None:
    from kerntune.strategies.gp_model import _GRID, _GP

    assert _GP(2, 10).grid == _GRID
    assert _GP(2, 10, theta_max=0.3).grid == (0.15, 0.3)
    assert _GP(2, 10, theta_max=0.01).grid == (0.15,)  # never empty


def test_twin_preq_scores_both_gps_and_runs_through_auto(tmp_path: Path) -> None:
    """Fifteenth pass: ``twin_preq`` scores auto's GP and the twin on each measurement before it is
    added, and is deterministic; off, the default's run is unchanged."""
    ev = synthetic_evaluator(tmp_path)
    base = run_search(ev, "auto", Budget(max_evals=40), seed=1)
    for opts in ({"twin_preq": True}, {"twin_preq": True, "preq_top": 0.5, "preq_min": 5},
                 {"twin_preq": True, "preq_others": True, "preq_decay": 1.0, "preq_min": 8, "preq_margin": 0.3},
                 {"twin_preq": True, "preq_until": 20, "preq_min": 10}, {"twin_credit": True}):
        res = run_search(ev, "auto", Budget(max_evals=40), seed=1, run=RunOptions(strategy_options=opts))
        again = run_search(ev, "auto", Budget(max_evals=40), seed=1, run=RunOptions(strategy_options=opts))
        assert len(res.history) == 40 and res.best is not None
        assert [t.config for t in res.history] == [t.config for t in again.history]
    same = run_search(ev, "auto", Budget(max_evals=40), seed=1,
                      run=RunOptions(strategy_options={"twin_preq": False}))
    assert [t.config for t in same.history] == [t.config for t in base.history]


def test_probe_every_scores_only_held_out_probes_and_runs_through_auto(tmp_path: Path) -> None:
    """Sixteenth pass: ``probe_every`` spends one evaluation in every so many on a uniformly random probe;
    with ``twin_preq`` only the probes are scored.  Deterministic; off (0), the default's run is unchanged."""
    ev = synthetic_evaluator(tmp_path)
    base = run_search(ev, "auto", Budget(max_evals=60), seed=1)
    for opts in ({"probe_every": 8}, {"twin_preq": True, "probe_every": 6, "preq_decay": 1.0, "preq_min": 2}):
        res = run_search(ev, "auto", Budget(max_evals=60), seed=1, run=RunOptions(strategy_options=opts))
        again = run_search(ev, "auto", Budget(max_evals=60), seed=1, run=RunOptions(strategy_options=opts))
        assert len(res.history) == 60 and res.best is not None
        assert [t.config for t in res.history] == [t.config for t in again.history]
        assert [t.config for t in res.history] != [t.config for t in base.history]
    same = run_search(ev, "auto", Budget(max_evals=60), seed=1, run=RunOptions(strategy_options={"probe_every": 0}))
    assert [t.config for t in same.history] == [t.config for t in base.history]
