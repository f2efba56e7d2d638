"""The Gaussian process behind ``bayes`` (``gp``), its warm-start prior (``gp_prior``) and the
surrogate strategies: a Hamming-kernel GP over a growable pool of encoded configs, and the
cached valid set it scores.

Its own module so that ``gp`` (the search) and ``gp_prior`` (the past runs' prior, one GP per
run) both build on it without importing each other.  ``gp``'s docstring says why each piece
is as it is.
"""

from __future__ import annotations

import math
import weakref
from typing import Sequence

import numpy as np

from kerntune.space import Config, Space

_ENUMERATE_LIMIT = 200_000  # cartesian points up to which the valid set is enumerated
_POOL_MAX = 20_000          # configs scored per step
_MAX_OBS = 500              # observations the model holds (memory: pool x this)
_FIT_UNTIL = 300            # length-scales are refitted up to this many observations, then kept
_GRID = (0.15, 0.3, 0.6, 1.2)
_NOISE = 1e-3
_POOLS: "weakref.WeakKeyDictionary[Space, tuple[list[Config], list[str], np.ndarray]]" = weakref.WeakKeyDictionary()


def _encode(space: Space, cfgs: Sequence[Config]) -> np.ndarray:
    return np.array([space.encode(c) for c in cfgs], dtype=float).reshape(len(cfgs), space.encoded_width)


def _enumerated(space: Space) -> tuple[list[Config], list[str], np.ndarray]:
    """The valid set with keys and encodings, built once per Space (repeats share it)."""
    if space not in _POOLS:
        cfgs = space.valid_configs()
        _POOLS[space] = (cfgs, [space.key(c) for c in cfgs], _encode(space, cfgs))
    return _POOLS[space]


class _GP:
    """Zero-mean GP with a Hamming ARD kernel, predicting over a growable pool."""

    def __init__(self, width: int, cap: int, noise: float = _NOISE) -> None:
        self.cap = cap
        self.noise = noise  # nugget, in units of the standardised targets' variance
        self.theta = np.zeros(width)
        self.pool = np.empty((0, width))
        self.obs = np.empty((cap, width))
        self.n = 0
        self.linv = np.zeros((cap, cap))
        self.v = np.empty((0, cap))
        self.vsq = np.empty(0)
        fit = min(cap, _FIT_UNTIL)
        self.diff = np.zeros((width, fit, fit), dtype=bool)  # per-field mismatch between observations

    def kernel(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        s = np.zeros((len(a), len(b)))
        for e in np.nonzero(self.theta)[0]:
            s += self.theta[e] * (a[:, e][:, None] != b[:, e][None, :])
        return np.exp(-s)

    def add_pool(self, feats: np.ndarray) -> None:
        v = np.zeros((len(feats), self.cap))
        if self.n:
            v[:, : self.n] = self.kernel(feats, self.obs[: self.n]) @ self.linv[: self.n, : self.n].T
        self.pool = np.vstack([self.pool, feats])
        self.v = np.vstack([self.v, v])
        self.vsq = np.concatenate([self.vsq, np.sum(v * v, 1)])

    def add_obs(self, feat: np.ndarray) -> None:
        """Append one observation: a rank-one extension of L^-1 and of V."""
        n = self.n
        self.obs[n] = feat
        if n < self.diff.shape[1]:
            d = (self.obs[: n + 1] != feat).T
            self.diff[:, n, : n + 1] = d
            self.diff[:, : n + 1, n] = d
        ell = self.linv[:n, :n] @ self.kernel(self.obs[:n], feat[None, :])[:, 0]
        delta = math.sqrt(max(1.0 + self.noise - ell @ ell, 1e-9))
        self.linv[n, :n] = -(ell @ self.linv[:n, :n]) / delta
        self.linv[n, n] = 1.0 / delta
        col = (self.kernel(self.pool, feat[None, :])[:, 0] - self.v[:, :n] @ ell) / delta
        self.v[:, n] = col
        self.vsq += col * col
        self.n = n + 1

    def drop_last(self, k: int) -> None:
        """Forget the last ``k`` observations (the fantasies of a batch): exact, since every
        structure grew by one row/column per observation."""
        for _ in range(k):
            self.n -= 1
            n = self.n
            self.vsq -= self.v[:, n] ** 2
            self.v[:, n] = 0.0
            self.linv[n, :] = 0.0

    def refit(self, yn: np.ndarray, live: np.ndarray) -> None:
        """Length-scales by marginal likelihood: best shared grid value, then one pass per field."""
        n = len(yn)
        diff = self.diff[:, :n, :n].astype(float)

        def nll(theta: np.ndarray) -> float:
            k = np.exp(-np.tensordot(theta, diff, 1)) + self.noise * np.eye(n)
            try:
                chol = np.linalg.cholesky(k)
            except np.linalg.LinAlgError:
                return math.inf
            z = np.linalg.solve(chol, yn)
            return 0.5 * n * math.log(max(z @ z / n, 1e-12)) + float(np.sum(np.log(np.diag(chol))))

        shared = [np.where(live, g, 0.0) for g in _GRID]
        best_v, best = min(((nll(t), i) for i, t in enumerate(shared)), key=lambda p: p[0])
        theta = shared[best]
        for e in np.nonzero(live)[0]:
            for g in _GRID:
                trial = theta.copy()
                trial[e] = g
                v = nll(trial)
                if v < best_v:
                    best_v, theta = v, trial
        if not np.array_equal(theta, self.theta):
            self.theta = theta
            n = self.n
            k = self.kernel(self.obs[:n], self.obs[:n]) + self.noise * np.eye(n)
            self.linv[:n, :n] = np.linalg.inv(np.linalg.cholesky(k))
            self.v[:, :n] = self.kernel(self.pool, self.obs[:n]) @ self.linv[:n, :n].T
            self.vsq = np.sum(self.v[:, :n] ** 2, 1)

    def predict(self, yn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and standard deviation (amplitude by maximum likelihood) over the pool."""
        z = self.linv[: self.n, : self.n] @ yn
        s2 = max(z @ z / self.n, 1e-12)
        return self.v[:, : self.n] @ z, np.sqrt(s2 * np.maximum(1.0 - self.vsq, 1e-12))

    def predict_at(self, feats: np.ndarray, yn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``predict`` at other points than the pool, which is left as it is."""
        n = self.n
        v = self.kernel(feats, self.obs[:n]) @ self.linv[:n, :n].T
        z = self.linv[:n, :n] @ yn
        s2 = max(z @ z / n, 1e-12)
        return v @ z, np.sqrt(s2 * np.maximum(1.0 - np.sum(v * v, 1), 1e-12))
