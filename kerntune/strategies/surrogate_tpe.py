"""TPE steps of ``auto``'s surrogate engine: the Tree-structured Parzen Estimator's proposal
(Bergstra et al. 2011, univariate), over the engine's pool of valid configs.

Why (thirty-first pass, ``benchmarks/search_quality/PASSES.md``).  On ten held-out recordings
(real Triton kernels of liger-kernel, fla-core and torchao on an H100 and an H200, and a
convolution on an RTX 2080 Ti) TPE had the best mean and the lightest tail of the classical
searches, where ``auto`` had runs that stayed 2x off the optimum through a short cutoff: every
one of ``auto``'s steps starts from the GP's bound or from the incumbent, while TPE's draws
change many fields at once towards values that were good anywhere in the history.

The step: the measured configs are split into the best ``gamma`` share (good) and the rest
(failures last); per encoded column the good and the rest give smoothed histograms over the
column's values (``l`` and ``g``; one-step Gaussian smoothing along ordered columns, a uniform
prior of one observation's weight); ``candidates`` unmeasured pool configs are drawn with
probability proportional to ``l``, and the one with the highest ``l / g`` is proposed.
Drawing from the valid pool keeps every proposal valid, which Optuna's TPE cannot (it proposes
in the cartesian box).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from kerntune.space.params import Choice, IntRange, PowerOfTwo


class TpeSteps:
    """``SurrogateSearch``'s TPE proposal (a mixin: it reads the engine's pool and history)."""

    ctx: Any
    opts: Any
    model: Any
    measured: list[bool]
    all_feats: list[np.ndarray]
    all_vals: list[float]

    def _tpe_levels(self) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
        """Per column: its distinct values; the pool's level indices; whether the column is ordered."""
        pool = self.model.pool
        cache = getattr(self, "_tpe_cache", None)
        if cache is not None and cache[0] == len(pool):
            return cache[1]
        levels = [np.unique(pool[:, e]) for e in range(pool.shape[1])]
        idx = np.stack([np.searchsorted(lv, pool[:, e]) for e, lv in enumerate(levels)], axis=1)
        ordered = []
        for p in self.ctx.space.params:
            o = isinstance(p, (PowerOfTwo, IntRange)) or (isinstance(p, Choice) and p.ordered)
            ordered += [o] * p.width
        out = (levels, idx, np.array(ordered, dtype=bool))
        self._tpe_cache = (len(pool), out)
        return out

    @staticmethod
    def _hist(rows: np.ndarray, k: int, ordered: bool) -> np.ndarray:
        counts = np.bincount(rows, minlength=k).astype(float)
        if ordered and k > 2:
            r = np.arange(k)
            counts = np.exp(-0.5 * (r[:, None] - r[None, :]) ** 2) @ counts
        dens = counts + max(counts.sum(), 1.0) / k / max(len(rows), 1)
        return np.asarray(dens / dens.sum())

    def tpe_pick(self, blocked: np.ndarray) -> int | None:
        """The pool index of a TPE proposal among the rows not ``blocked``, or None."""
        free = np.flatnonzero(~blocked)
        if len(free) == 0 or len(self.all_vals) < 2:
            return None
        levels, idx, ordered = self._tpe_levels()
        obs = np.array(self.all_feats)
        vals = np.array(self.all_vals)
        order = np.argsort(vals, kind="stable")
        n_good = min(max(1, math.ceil(self.opts.tpe_gamma * len(vals))), 25)
        good, bad = order[:n_good], order[n_good:]
        log_l = np.zeros(len(free))
        log_g = np.zeros(len(free))
        for e, lv in enumerate(levels):
            k = len(lv)
            if k < 2:
                continue
            col = np.minimum(np.searchsorted(lv, obs[:, e]), k - 1)
            lden = self._hist(col[good], k, bool(ordered[e]))
            gden = self._hist(col[bad], k, bool(ordered[e])) if len(bad) else np.full(k, 1.0 / k)
            rows = idx[free, e]
            log_l += np.log(lden[rows])
            log_g += np.log(gden[rows])
        m = min(self.opts.tpe_candidates, len(free))
        w = np.exp(log_l - log_l.max())
        rng = np.random.default_rng(self.ctx.rng.getrandbits(32))
        cand = rng.choice(len(free), size=m, replace=False, p=w / w.sum())
        best = cand[int(np.argmax((log_l - log_g)[cand]))]
        return int(free[best])
