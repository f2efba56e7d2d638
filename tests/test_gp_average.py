"""theta_models (gp_average.py): the GP averaged over its length-scale settings."""

from __future__ import annotations

import numpy as np

from kerntune.strategies.gp_average import GPAverage, mixture, setting_key, top_settings
from kerntune.strategies.gp_model import _GP


def _data(seed: int = 0, width: int = 5, pool: int = 200, n: int = 30):
    rng = np.random.default_rng(seed)
    feats = rng.integers(0, 4, size=(pool, width)).astype(float)
    y = np.sin(feats[:, 0]) + 0.5 * feats[:, 1] - 0.3 * (feats[:, 2] == 2) + 0.05 * rng.standard_normal(pool)
    idx = rng.choice(pool, n, replace=False)
    yn = (y[idx] - y[idx].mean()) / y[idx].std()
    return feats, idx, yn


def _fitted(model, feats, idx, yn):
    model.add_pool(feats)
    for i in idx:
        model.add_obs(feats[i])
    model.refit(yn, np.ones(feats.shape[1], bool))
    return model


def _kw():
    return dict(steps=np.array([3.0, 3.0, 0.0, 3.0, 0.0]), alpha=1.0, adaptive=True)


def test_one_model_and_vanishing_weights_equal_the_single_gp():
    feats, idx, yn = _data()
    single = _fitted(_GP(5, 64, **_kw()), feats, idx, yn)
    mu, sd = single.predict(yn)
    one = _fitted(GPAverage(1, 1.0, 5, 64, **_kw()), feats, idx, yn)
    mu1, sd1 = one.predict(yn)
    assert np.array_equal(mu, mu1) and np.array_equal(sd, sd1)
    # a tiny temper leaves all the weight on the best setting: the mixture is the single GP
    sharp = _fitted(GPAverage(3, 1e-9, 5, 64, **_kw()), feats, idx, yn)
    assert sharp.active == 3 and np.isclose(sharp.w[0], 1.0)
    mu3, sd3 = sharp.predict(yn)
    assert np.allclose(mu3, mu) and np.allclose(sd3, sd)
    assert np.array_equal(sharp.models[0].theta, single.theta)


def test_mixture_is_the_law_of_total_variance():
    feats, idx, yn = _data(1)
    avg = _fitted(GPAverage(3, 50.0, 5, 64, **_kw()), feats, idx, yn)
    assert avg.active == 3
    assert np.isclose(avg.w.sum(), 1.0) and np.all(avg.w > 0.01)
    settings = {setting_key(m.theta, m.kind, m.steps) for m in avg.models}
    assert len(settings) == 3  # distinct kernels
    outs = [m.predict(yn) for m in avg.models]
    mu, sd = avg.predict(yn)
    w = avg.w
    assert np.allclose(mu, sum(wk * o[0] for wk, o in zip(w, outs)))
    within = sum(wk * o[1] ** 2 for wk, o in zip(w, outs))
    between = sum(wk * (o[0] - mu) ** 2 for wk, o in zip(w, outs))
    assert np.allclose(sd ** 2, within + between)
    assert np.all(sd ** 2 >= within - 1e-12) and between.max() > 1e-6  # the settings disagree somewhere
    # predict_at agrees with predict at pool points
    mu_at, sd_at = avg.predict_at(feats[:20], yn)
    assert np.allclose(mu_at, mu[:20]) and np.allclose(sd_at, sd[:20])
    # fantasies: add_obs then drop_last restores every model
    avg.add_obs(feats[0])
    avg.drop_last(1)
    mu2, sd2 = avg.predict(yn)
    assert np.allclose(mu2, mu) and np.allclose(sd2, sd)


def test_top_settings_weights_and_order():
    a, b = np.array([0.3, 0.3]), np.array([0.6, 0.3])
    k = np.zeros(2, bool)
    visited = [(5.0, a, k), (4.0, b, k), (4.0, b.copy(), k), (np.inf, a * 2, k), (6.0, a * 4, k)]
    top = top_settings(visited, 3, 1.0)
    assert [t[1].tolist() for t in top] == [b.tolist(), a.tolist(), (a * 4).tolist()]
    w = np.array([t[0] for t in top])
    assert np.allclose(w, np.exp([0.0, -1.0, -2.0]) / np.exp([0.0, -1.0, -2.0]).sum())
    # a two-valued field's ordinal term is its mismatch: the same kernel, one setting
    twins = [(1.0, a, np.array([True, False])), (1.0, a, np.array([False, False])), (2.0, b, k)]
    assert len(top_settings(twins, 3, 1.0, steps=np.array([1.0, 3.0]))) == 2
    assert len(top_settings(twins, 3, 1.0, steps=np.array([2.0, 3.0]))) == 3
    mean, sd = mixture([np.array([0.0]), np.array([2.0])], [np.array([1.0]), np.array([1.0])], np.array([0.5, 0.5]))
    assert np.allclose(mean, 1.0) and np.allclose(sd, np.sqrt(2.0))
