"""Pieces of the surrogate engine that the sixth design pass measured as options (issue 24,
acceptance 1; ``benchmarks/search_quality/README.md``, "Sixth pass").  The copula warp of the
targets became the default after the seventh pass (60 repeats a seed: a higher mean score beyond
its error, the worst space unchanged); the rest are off: each lifted one recorded space and cost
another.  They stay as options so that the passes' tables can be re-run from the code, and so
that a later pass can build on them.
"""

from __future__ import annotations

import contextlib
import math
from statistics import NormalDist
from typing import Any, Callable, Iterator

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


def thompson_pick(model, yn: np.ndarray, allowed: np.ndarray, lcb: np.ndarray, size: int, rng) -> int | None:
    """``ts_share``: the argmin of one joint sample of the GP posterior over a candidate set (the
    ``size`` allowed configs of lowest LCB and as many random allowed ones), or None."""
    idx = np.nonzero(allowed)[0]
    if len(idx) == 0:
        return None
    if len(idx) > 2 * size:
        top = idx[np.argsort(lcb[idx], kind="stable")[:size]]
        rest = np.setdiff1d(idx, top)
        rnd = np.array(sorted(rng.sample(list(rest), min(size, len(rest)))), dtype=int)
        idx = np.concatenate([top, rnd])
    n = model.n
    z = model.linv[:n, :n] @ yn
    s2 = max(z @ z / n, 1e-12)
    feats = model.pool[idx]
    v = model.v[idx, :n]
    mean = v @ z
    cov = s2 * (model.kernel(feats, feats) - v @ v.T)
    cov[np.diag_indices_from(cov)] += 1e-6 * s2
    try:
        chol = np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:
        w, q = np.linalg.eigh(cov)
        chol = q * np.sqrt(np.maximum(w, 0.0))
    eps = np.array([rng.gauss(0.0, 1.0) for _ in range(len(idx))])
    return int(idx[int(np.argmin(mean + chol @ eps))])


def _phi_cdf(u: np.ndarray) -> np.ndarray:
    """Standard normal CDF (Abramowitz-Stegun 7.1.26 erf, |error| < 1.5e-7)."""
    x = np.abs(u) / math.sqrt(2.0)
    t = 1.0 / (1.0 + 0.3275911 * x)
    erf = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * np.exp(-x * x)
    return 0.5 * (1.0 + np.sign(u) * erf)


def acquisitions(mu: np.ndarray, sd: np.ndarray, best: float, kappas: tuple[float, ...]) -> list[np.ndarray]:
    """``hedge``'s portfolio (GP-Hedge, Hoffman et al. 2011), each a score to minimise: LCB at each
    of ``kappas``, then expected improvement and probability of improvement over ``best``."""
    u = (best - mu) / sd
    ei = (best - mu) * _phi_cdf(u) + sd * np.exp(-0.5 * u * u) / math.sqrt(2 * math.pi)
    return [mu - k * sd for k in kappas] + [-ei, -u]


def subspace_best(pool: np.ndarray, free: np.ndarray, base: np.ndarray, measured: np.ndarray,
                  score: Callable[[], np.ndarray]) -> int | None:
    """Index of the unmeasured pool entry with the lowest ``score()`` among those that agree with
    ``base`` on every encoded column not in ``free`` (``SurrogateOptions.perturb_lcb``: a
    perturbation whose redrawn fields take the model's pick, block-coordinate BO), or None.
    ``score`` is called only when there is a candidate (the engine's bound may refit the model)."""
    fixed = ~free
    ok = np.all(pool[:, fixed] == base[fixed], axis=1) & ~measured
    if not ok.any():
        return None
    return int(np.argmin(np.where(ok, score(), np.inf)))


def shell_best(pool: np.ndarray, widths: list[int], base: np.ndarray, lo: int, hi: int, measured: np.ndarray,
               score: Callable[[], np.ndarray]) -> int | None:
    """Index of the unmeasured pool entry with the lowest ``score()`` among those that differ from
    ``base`` in ``lo`` to ``hi`` fields (``SurrogateOptions.perturb_shell``: a jump of a few fields
    at once whose fields the model picks as well as their values), or None.  ``widths``: the
    encoded columns of each field, in order."""
    diff = pool != base
    fields = np.zeros(len(pool), dtype=int)
    at = 0
    for w in widths:
        if w:
            fields += diff[:, at:at + w].any(axis=1)
        at += w
    ok = (fields >= lo) & (fields <= hi) & ~measured
    if not ok.any():
        return None
    return int(np.argmin(np.where(ok, score(), np.inf)))


def maximin_pick(names: list[str], chosen: list[dict], candidates: list[dict], n: int) -> list[dict]:
    """Twelfth pass (``startup_design`` "maximin"): ``n`` of ``candidates`` picked greedily so
    that each is as many fields as possible from everything chosen before it (the default
    config included), ties to the earlier candidate (they come in random order).

    Why: the startup's few random configs are all the GP knows when it first decides; configs
    that share few field values teach it about more values of each field (a Latin-hypercube-like
    design over categorical fields, Hamming distance being the GP kernel's own), where
    independent draws often repeat a value and leave others unseen.  Measured in the README's
    twelfth pass."""
    rows = [tuple(c.get(k) for k in names) for c in candidates]
    base = [tuple(c.get(k) for k in names) for c in chosen]
    dist = np.array([min((sum(a != b for a, b in zip(r, c)) for c in base), default=len(names)) for r in rows])
    out: list[dict] = []
    free = np.ones(len(rows), dtype=bool)
    for _ in range(min(n, len(rows))):
        i = int(np.argmax(np.where(free, dist, -1)))
        out.append(candidates[i])
        free[i] = False
        dist = np.minimum(dist, [sum(a != b for a, b in zip(r, rows[i])) for r in rows])
    return out


def startup_configs(ctx, opts) -> list[dict]:
    """The engine's startup: the space's default (unless ``startup_default`` is off), then random
    configs up to ``startup`` trials in all, drawn independently or (``startup_design``) by
    ``maximin_pick``, "maximin" counting the default and earlier trials as chosen, "spread" not.

    Why the default stays first and draws stay independent (twelfth pass): the early negative
    P(n) on the Kernel Tuner recordings is exactly a slow default taking one of the first n slots,
    a user's default is often good (1.06-1.28x the optimum on the matmul recordings), and the
    space-filling designs moved the first evaluations but not the score."""
    need = max(opts.startup - len(ctx.history), 0)
    first = ctx.unmeasured([ctx.space.default])[:need] if opts.startup_default else []
    rest = max(need - len(first), 0)
    if opts.startup_design == "random" or rest == 0:
        return first + ctx.sample_unmeasured(rest)
    names = [p.name for p in ctx.space.params]
    done = first + [t.config for t in ctx.history] if opts.startup_design == "maximin" else []
    return first + maximin_pick(names, done, ctx.sample_unmeasured(rest * opts.startup_pool), rest)


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
