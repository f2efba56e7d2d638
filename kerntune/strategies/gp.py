"""Gaussian-process Bayesian optimisation over the enumerated valid set.

Kernel spaces are discrete and usually small enough to enumerate (thousands
to a few million valid configs), so instead of optimising an acquisition
function in a continuous box and snapping to the nearest valid config, this
strategy scores *every unmeasured valid config* by Expected Improvement and
measures the best.  The surrogate is a GP with a Matérn-5/2 kernel on the
Space's [0, 1] encoding (order-preserving, so powers of two sit on a log
scale), fitted to log-times; the length-scale is chosen by marginal
likelihood on a small grid.  Failed configs are never proposed again and
their one-field neighbours are slightly penalised through a constant-liar
value (the worst time seen), so the model learns where configs break.
"""

from __future__ import annotations

import math

import numpy as np

from kerntune.space import Config
from kerntune.strategies.base import SearchContext

_LENGTHSCALES = (0.08, 0.12, 0.18, 0.25, 0.35, 0.5, 0.7, 1.0)
_POOL_LIMIT = 200_000


def _matern52(a: np.ndarray, b: np.ndarray, ls: float) -> np.ndarray:
    d2 = np.maximum(np.sum(a * a, 1)[:, None] + np.sum(b * b, 1)[None, :] - 2 * a @ b.T, 0.0)
    r = np.sqrt(5.0 * d2) / ls
    return (1.0 + r + r * r / 3.0) * np.exp(-r)


def _fit(x: np.ndarray, y: np.ndarray, noise: float) -> tuple[float, np.ndarray, np.ndarray]:
    best = (-math.inf, _LENGTHSCALES[0], None, None)
    n = len(y)
    for ls in _LENGTHSCALES:
        k = _matern52(x, x, ls) + noise * np.eye(n)
        try:
            chol = np.linalg.cholesky(k)
        except np.linalg.LinAlgError:
            continue
        alpha = np.linalg.solve(chol.T, np.linalg.solve(chol, y))
        loglik = -0.5 * y @ alpha - np.sum(np.log(np.diag(chol)))
        if loglik > best[0]:
            best = (loglik, ls, chol, alpha)
    return best[1], best[2], best[3]  # type: ignore[return-value]


def _expected_improvement(mu: np.ndarray, sigma: np.ndarray, best: float, xi: float) -> np.ndarray:
    from math import erf  # local: avoids a scipy dependency

    sigma = np.maximum(sigma, 1e-9)
    z = (best - mu - xi) / sigma
    cdf = 0.5 * (1.0 + np.vectorize(erf)(z / math.sqrt(2.0)))
    pdf = np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
    return (best - mu - xi) * cdf + sigma * pdf


def search(ctx: SearchContext, startup: int = 10, xi: float = 0.01, noise: float = 1e-3,
           refit_every: int = 5) -> None:
    space = ctx.space
    if space.cartesian_size > _POOL_LIMIT * 20:
        # Too large to enumerate: fall back to sampling a fresh candidate pool each step.
        pool_cfgs: list[Config] | None = None
    else:
        pool_cfgs = space.valid_configs()
    first = ctx.unmeasured([space.default]) + ctx.sample_unmeasured(max(startup - 1, 1))
    ctx.evaluate(first, source="gp:startup")
    pool_x = np.array([space.encode(c) for c in pool_cfgs]) if pool_cfgs is not None else None
    pool_keys = [space.key(c) for c in pool_cfgs] if pool_cfgs is not None else None
    ls = None
    step = 0
    while True:
        if pool_cfgs is None:
            cands = ctx.sample_unmeasured(2000)
            cx = np.array([space.encode(c) for c in cands]) if cands else np.empty((0, space.encoded_width))
        else:
            idx = [i for i, k in enumerate(pool_keys) if k not in ctx.measured]  # type: ignore[arg-type]
            cands = [pool_cfgs[i] for i in idx]
            cx = pool_x[idx] if idx else np.empty((0, space.encoded_width))  # type: ignore[index]
        if not cands:
            ctx.stop_reason = "space exhausted"
            return
        xs, ys = [], []
        ok_vals = [math.log(t.time_ms) for t in ctx.history if t.ok]  # type: ignore[arg-type]
        if not ok_vals:
            ctx.evaluate(ctx.sample_unmeasured(1), source="gp:random")
            continue
        worst = max(ok_vals)
        for t in ctx.history:
            xs.append(space.encode(t.config))
            ys.append(math.log(t.time_ms) if t.ok else worst)  # type: ignore[arg-type]
        x = np.array(xs)
        y = np.array(ys)
        mean, std = y.mean(), y.std() or 1.0
        yn = (y - mean) / std
        if ls is None or step % refit_every == 0:
            ls, chol, alpha = _fit(x, yn, noise)
        else:
            from kerntune.strategies.gp import _matern52 as k52  # noqa: F401 - same function, keeps ls fixed
            kmat = _matern52(x, x, ls) + noise * np.eye(len(yn))
            chol = np.linalg.cholesky(kmat)
            alpha = np.linalg.solve(chol.T, np.linalg.solve(chol, yn))
        step += 1
        kstar = _matern52(cx, x, ls)
        mu = kstar @ alpha
        v = np.linalg.solve(chol, kstar.T)
        var = np.maximum(1.0 - np.sum(v * v, 0), 1e-12)
        ei = _expected_improvement(mu, np.sqrt(var), float(yn.min()), xi)
        pick = int(np.argmax(ei))
        ctx.evaluate([cands[pick]], source="gp")
