"""Pieces of the surrogate engine that the sixth design pass measured as options (issue 24,
acceptance 1; ``benchmarks/search_quality/README.md``, "Sixth pass").  The copula warp of the
targets became the default after the seventh pass (60 repeats a seed: a higher mean score beyond
its error, the worst space unchanged); the rest are off: each lifted one recorded space and cost
another.  They stay as options so that the passes' tables can be re-run from the code, and so
that a later pass can build on them.
"""

from __future__ import annotations

from statistics import NormalDist
from typing import Callable

import numpy as np

_ND = NormalDist()


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
    if how == "copula":
        order = np.argsort(y, kind="stable")
        ranks = np.empty(len(y))
        ranks[order] = np.arange(len(y), dtype=float)
        _, inv, counts = np.unique(y, return_inverse=True, return_counts=True)
        if (counts > 1).any():
            ranks = (np.bincount(inv, weights=ranks) / counts)[inv]
        return np.array([_ND.inv_cdf((r + 0.5) / len(y)) for r in ranks])
    raise ValueError(f"auto: y_warp must be log, copula, blend or clip, not {how!r}")


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
