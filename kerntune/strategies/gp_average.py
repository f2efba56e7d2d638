"""``theta_models`` > 1 (twenty-third pass, off by default): the engine's GP averaged over its
length-scales (Bayesian model averaging of the hyperparameters, as in Snoek et al. 2012's
integrated acquisition, over a discrete set instead of by slice sampling).

``_GP.refit`` keeps only the best (theta, kind) its coordinate search finds.  With few
observations that choice may be overconfident; here the K best distinct settings the same search
evaluated are kept, each in a ``_GP`` of its own over the same pool and observations, weighted by
their marginal likelihoods (w_k proportional to exp(-(nll_k - min nll) / temper)).  The prediction is
the mixture's: mean sum w_k mu_k, variance sum w_k (sd_k^2 + mu_k^2) - mean^2 (so it is wider
where the settings disagree).  The weights are fixed at each refit, like the settings.
"""

from __future__ import annotations

import math

import numpy as np

from kerntune.strategies.gp_model import _GP


def mixture(mus: list[np.ndarray], sds: list[np.ndarray], w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation of the weighted mixture of Gaussians (mu_k, sd_k)."""
    mean = sum(wk * mu for wk, mu in zip(w, mus))
    second = sum(wk * (sd * sd + mu * mu) for wk, mu, sd in zip(w, mus, sds))
    return mean, np.sqrt(np.maximum(second - mean * mean, 0.0))


def setting_key(theta: np.ndarray, kind: np.ndarray, steps: np.ndarray | None = None) -> bytes:
    """Settings with the same key have the same kernel: a field's kind does not matter where its
    length-scale parameter is 0, nor where it has two values (``steps`` 1: its ordinal term
    ``|index difference|`` is its mismatch)."""
    kind = kind & (theta > 0)
    if steps is not None:
        kind = kind & (steps > 1)
    return theta.tobytes() + kind.tobytes()


def top_settings(visited: list[tuple[float, np.ndarray, np.ndarray]], k: int, temper: float,
                 steps: np.ndarray | None = None) -> list[tuple[float, np.ndarray, np.ndarray]]:
    """The ``k`` finite-nll settings of lowest nll with distinct kernels (``setting_key``), each
    with its normalised weight (in place of its nll), best first."""
    seen: set[bytes] = set()
    out: list[tuple[float, np.ndarray, np.ndarray]] = []
    for v, theta, kind in sorted(visited, key=lambda p: p[0]):  # stable: ties keep search order
        key = setting_key(theta, kind, steps)
        if not math.isfinite(v) or key in seen:
            continue
        seen.add(key)
        out.append((v, theta, kind))
        if len(out) == k:
            break
    if not out:
        return []
    w = np.exp(-(np.array([v for v, _, _ in out]) - out[0][0]) / temper)
    w /= w.sum()
    return [(float(wk), theta, kind) for wk, (_, theta, kind) in zip(w, out)]


class GPAverage:
    """K ``_GP``s over one pool and one set of observations, each with its own length-scales; the
    first is refitted as ``_GP.refit`` always did and the others take the runners-up of its search.
    The interface the engine uses of ``_GP``: ``pool``, ``n``, ``add_pool``, ``add_obs``,
    ``drop_last``, ``refit``, ``predict``, ``predict_at``."""

    def __init__(self, k: int, temper: float, *args, **kwargs) -> None:
        self.models = [_GP(*args, **kwargs) for _ in range(k)]
        self.temper = temper
        self.w = np.zeros(k)
        self.w[0] = 1.0  # before the first refit every model has theta 0: one is enough
        self.active = 1

    @property
    def pool(self) -> np.ndarray:
        return self.models[0].pool

    @property
    def n(self) -> int:
        return self.models[0].n

    def add_pool(self, feats: np.ndarray) -> None:
        for m in self.models:
            m.add_pool(feats)

    def add_obs(self, feat: np.ndarray) -> None:
        for m in self.models:
            m.add_obs(feat)

    def drop_last(self, k: int) -> None:
        for m in self.models:
            m.drop_last(k)

    def refit(self, yn: np.ndarray, live: np.ndarray) -> None:
        visited: list[tuple[float, np.ndarray, np.ndarray]] = []
        first = self.models[0]
        first.refit(yn, live, visited)
        top = top_settings(visited, len(self.models), self.temper, first.steps)
        # the primary keeps refit's choice, which is top[0]'s kernel (the search's strict minimum
        # comes first among equal nlls by order; matched by key to be safe)
        own = setting_key(first.theta, first.kind, first.steps)
        rest = [t for t in top if setting_key(t[1], t[2], first.steps) != own]
        w0 = [t[0] for t in top if setting_key(t[1], t[2], first.steps) == own]
        self.w = np.zeros(len(self.models))
        self.w[0] = w0[0] if w0 else 1.0
        for j, (wk, theta, kind) in enumerate(rest[: len(self.models) - 1], start=1):
            self.models[j].set_hyper(theta, kind)
            self.w[j] = wk
        self.active = 1 + min(len(rest), len(self.models) - 1)
        self.w /= self.w.sum()

    def _mix(self, outs: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
        if self.active == 1:
            return outs[0]
        return mixture([o[0] for o in outs], [o[1] for o in outs], self.w[: self.active])

    def predict(self, yn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self._mix([m.predict(yn) for m in self.models[: self.active]])

    def predict_at(self, feats: np.ndarray, yn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self._mix([m.predict_at(feats, yn) for m in self.models[: self.active]])
