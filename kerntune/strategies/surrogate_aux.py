"""Pieces of the surrogate engine apart from its steps: the GP's target warps (``y_warp``; the
copula warp became the default after the seventh pass, ``benchmarks/search_quality/PASSES.md``),
the startup and the one-BLAS-thread guard.
"""

from __future__ import annotations

import contextlib
import math
from statistics import NormalDist
from typing import Any, Iterator

import numpy as np

_ND = NormalDist()


WARPS = ("log", "copula", "blend", "clip", "boxcox", "yeojohnson")  # the names ``warp`` takes


def warp(y: np.ndarray, how: str, q: float = 0.5) -> np.ndarray:
    """The GP's targets before standardising (``SurrogateOptions.y_warp``).

    Why: log-times are heavy-tailed (a few configs 5-20x slower than the rest set the GP's
    amplitude and its length-scales), while the search only cares how the good configs order.
    "copula" maps the ranks to normal scores (as HEBO and TPE do; ties share their mean rank),
    "blend" averages that with the standardised log-times, "clip" caps the log-times above their
    ``q`` quantile so that the slow part is one flat level.  Measured: the warps lift
    dedispersion_A100 and the matmul spaces a little and cost convolution_A100, whose isolated
    optimum is told apart by magnitude (1.47x families), not by rank."""
    if how == "log" or len(y) < 3:
        return y
    if how == "clip":
        return np.minimum(y, np.quantile(y, q))
    if how == "blend":
        return 0.5 * (y - y.mean()) / (y.std() or 1.0) + 0.5 * warp(y, "copula", q)
    if how in ("boxcox", "yeojohnson"):
        return power(y, how)
    if how == "copula":
        order = np.argsort(y, kind="stable")
        ranks = np.empty(len(y))
        ranks[order] = np.arange(len(y), dtype=float)
        _, inv, counts = np.unique(y, return_inverse=True, return_counts=True)
        if (counts > 1).any():
            ranks = (np.bincount(inv, weights=ranks) / counts)[inv]
        return np.array([_ND.inv_cdf((r + 0.5) / len(y)) for r in ranks])
    raise ValueError(f"auto: y_warp must be one of {', '.join(WARPS)}, not {how!r}")


_LAMBDAS = np.linspace(-3.0, 2.0, 51)


def power(y: np.ndarray, how: str) -> np.ndarray:
    """A power transform with its exponent by maximum likelihood (tenth pass; HEBO warps its targets
    so).  "boxcox": Box-Cox of the times (``exp(y)``, relative to their median: the exponent's
    estimate does not depend on the scale); a negative exponent compresses the slow tail to a plateau
    while the fast configs keep their magnitudes, unlike ranks.  "yeojohnson": Yeo-Johnson of the
    standardised log-times.  The exponent is the best of a grid over [-3, 2]."""
    if how == "boxcox":
        x = y - np.median(y)          # log of the times relative to their median
        jac = x.sum()                 # sum of log-times: the Jacobian term (lambda - 1) * sum(log t)

        def tf(lam: float) -> np.ndarray:
            return x if abs(lam) < 1e-9 else np.expm1(np.clip(lam * x, -50.0, 50.0)) / lam
    else:
        x = (y - y.mean()) / (y.std() or 1.0)
        pos = x >= 0
        jac = float(np.sum(np.sign(x) * np.log1p(np.abs(x))))

        def tf(lam: float) -> np.ndarray:
            out = np.empty_like(x)
            out[pos] = np.log1p(x[pos]) if abs(lam) < 1e-9 else np.expm1(lam * np.log1p(x[pos])) / lam
            l2 = 2.0 - lam
            out[~pos] = -np.log1p(-x[~pos]) if abs(l2) < 1e-9 else -np.expm1(l2 * np.log1p(-x[~pos])) / l2
            return out
    best, best_ll = x, -math.inf
    for lam in _LAMBDAS:
        t = tf(float(lam))
        v = t.var()
        if not np.isfinite(v) or v <= 1e-300:
            continue
        ll = -0.5 * len(x) * math.log(v) + (lam - 1.0) * jac
        if ll > best_ll:
            best, best_ll = t, ll
    return best


def startup_configs(ctx, opts) -> list[dict]:
    """The engine's startup: the space's default, then random configs up to ``startup`` trials in all.

    Why the default stays first and draws stay independent (twelfth pass): the early negative
    P(n) on the Kernel Tuner recordings is exactly a slow default taking one of the first n slots,
    a user's default is often good (1.06-1.28x the optimum on the matmul recordings), and
    space-filling designs (maximin over fields) moved the first evaluations but not the score."""
    return ctx.startup(opts.startup - len(ctx.history))


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """The model's matrices are small (at most a few hundred rows): on a shared machine several
    BLAS threads per factorisation oversubscribe the cores and a 200-evaluation run took 95 s
    instead of 1 s (measured on 2 shared cores).  One thread is as fast when the machine is
    idle.  threadpoolctl is optional: without it nothing changes.

    The controller (which BLAS libraries the process holds) is found once: looking them up on every
    call read the process's memory map each time, a visible share of a replay run's profile."""
    global _BLAS
    if _BLAS is None:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:  # pragma: no cover - optional
            _BLAS = False
        else:
            _BLAS = ThreadpoolController()
    if _BLAS is False:  # pragma: no cover - optional
        yield
        return
    with _BLAS.limit(limits=1, user_api="blas"):
        yield


_BLAS: Any = None  # threadpoolctl's controller once looked up; False without threadpoolctl
