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
from dataclasses import dataclass
from typing import Callable, Sequence

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


def ordinal_steps(space: Space) -> np.ndarray:
    """Per encoded column: the number of steps between its first and last value for an ordered
    parameter of one column (block sizes, stages, unroll factors), 0 for the others (unordered
    options, permutations, vectors), which the kernel keeps Hamming."""
    out: list[float] = []
    for p in space.params:
        if p.width == 1 and getattr(p, "ordered", True):
            out.append(float(max(len(p.values()) - 1, 0)))
        else:
            out.extend([0.0] * p.width)
    return np.array(out)


def _valuation(x: int, cap: int = 10) -> int:
    """How many times 2 divides ``x`` (its trailing zero bits), at most ``cap``; 0 divides by anything."""
    return cap if x == 0 else min((x & -x).bit_length() - 1, cap)


@dataclass(frozen=True)
class Derived:
    """A column the GP's kernel adds to the space's encoding: ``column`` maps encoded rows to one
    value each, and ``steps`` is its span in ordinal steps (the ordinal term's scale)."""

    column: Callable[[np.ndarray], np.ndarray]
    steps: float


def _table_column(col: int, table: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    return lambda feats: table[np.rint(feats[:, col] * (len(table) - 1)).astype(int)]


def alignment_columns(space: Space) -> list[Derived]:
    """Per ordered integer field whose values are not a run of powers of two: a column holding
    the alignment level of its value.  The level is the value's power-of-two divisibility (2-adic
    valuation), ranked among the levels the field has and scaled to [0, 1].

    Why: on a GPU, sizes that are multiples of the warp or wavefront width, of a memory transaction
    or of the shared-memory bank count behave alike whatever their magnitude, so a block size of 32,
    64 or 96 and one of 48 or 80 fall into different groups that the value order cannot express (a
    sawtooth along the order).  An extra column lets the GP's kernel carry what it learns about one
    aligned size to the others; its length-scale is fitted like any field's, and zero switches it off.
    A field of powers of two only gets none: its level order is its value order, which the field's
    own column already holds."""
    out: list[Derived] = []
    col = 0
    for p in space.params:
        vals = p.values() if p.width == 1 else ()
        if (p.width == 1 and getattr(p, "ordered", True) and len(vals) > 2
                and all(isinstance(v, int) and not isinstance(v, bool) for v in vals)):
            levels = [_valuation(abs(int(v))) for v in vals]  # type: ignore[arg-type]
            distinct = sorted(set(levels))
            monotone = all(a < b for a, b in zip(levels, levels[1:])) or all(a > b for a, b in zip(levels, levels[1:]))
            if len(distinct) > 1 and not monotone:
                rank = {lv: i for i, lv in enumerate(distinct)}
                out.append(Derived(_table_column(col, np.array([rank[lv] / (len(distinct) - 1) for lv in levels])),
                                   float(len(distinct) - 1)))
        col += p.width
    return out


class _GP:
    """Zero-mean GP with a Hamming ARD kernel, predicting over a growable pool.

    With ``steps`` and ``alpha`` > 0 (``auto``'s ``gp_ordinal``, on by default), an ordered field's term can be
    ``(|index difference|) ** alpha`` instead of 0/1, a powered-exponential kernel along the value
    order (positive definite for 0 < alpha <= 2): adjacent values correlate as under Hamming, values
    far apart less, so that a good block size says something about its neighbours and little about
    the far end of the range (``adaptive``: ordinal or Hamming per field, by the marginal likelihood).
    Unordered fields stay Hamming.

    With ``aux`` (``alignment_columns``; ``auto``'s ``gp_align``), derived columns join the kernel:
    callers keep passing the space's own encoding (``pool`` stays in it), and the GP appends the
    derived columns itself (``xpool``, ``obs``)."""

    def __init__(self, width: int, cap: int, noise: float = _NOISE, steps: np.ndarray | None = None,
                 alpha: float = 0.0, adaptive: bool = False,
                 aux: list[Derived] | None = None) -> None:
        self.cap = cap
        self.noise = noise  # nugget, in units of the standardised targets' variance
        self.aux = aux or []
        self.base_width = width
        steps = steps if (steps is not None and alpha > 0) else np.zeros(width)
        if self.aux:  # a derived column is ordered along its levels (Hamming when alpha is 0)
            extra = [d.steps if alpha > 0 else 0.0 for d in self.aux]
            steps = np.concatenate([steps, extra])
            width += len(self.aux)
        self.steps = steps
        self.alpha = alpha
        #: per column: the ordinal term (True) or the mismatch; ``adaptive`` starts every column at
        #: the mismatch and lets the marginal likelihood switch an ordered one over at each refit
        self.adaptive = adaptive and bool(self.steps.any())
        self.kind = (self.steps > 0) & (not self.adaptive)
        self.theta = np.zeros(width)
        self.pool = np.empty((0, self.base_width))
        self.xpool = self.pool if not self.aux else np.empty((0, width))
        self.obs = np.empty((cap, width))
        self.n = 0
        self.linv = np.zeros((cap, cap))
        self.v = np.empty((0, cap))
        self.vsq = np.empty(0)
        fit = min(cap, _FIT_UNTIL)
        self.diff = np.zeros((width, fit, fit), dtype=bool)  # per-field mismatch between observations
        # per-field ordinal distance between observations (ordered fields only)
        self.odiff = np.zeros((width, fit, fit), dtype=np.float32) if self.steps.any() else None

    def _ordinal(self, e: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return (np.abs(a[:, None] - b[None, :]) * self.steps[e]) ** self.alpha

    def _dist(self, e: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Field e's term between the rows of a (column) and b (row)."""
        return self._ordinal(e, a, b) if self.kind[e] else a[:, None] != b[None, :]

    def expand(self, feats: np.ndarray) -> np.ndarray:
        """The space's encoding plus the derived columns (``feats`` itself when there are none)."""
        if not self.aux:
            return feats
        return np.hstack([feats, np.array([d.column(feats) for d in self.aux]).T])

    def kernel(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """The kernel between rows in the space's own encoding."""
        return self._xkernel(self.expand(a), self.expand(b))

    def _xkernel(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        s = np.zeros((len(a), len(b)))
        for e in np.nonzero(self.theta)[0]:
            s += self.theta[e] * self._dist(e, a[:, e], b[:, e])
        return np.exp(-s)

    def add_pool(self, feats: np.ndarray) -> None:
        x = self.expand(feats)
        v = np.zeros((len(feats), self.cap))
        if self.n:
            v[:, : self.n] = self._xkernel(x, self.obs[: self.n]) @ self.linv[: self.n, : self.n].T
        self.pool = np.vstack([self.pool, feats])
        self.xpool = self.pool if not self.aux else np.vstack([self.xpool, x])
        self.v = np.vstack([self.v, v])
        self.vsq = np.concatenate([self.vsq, np.sum(v * v, 1)])

    def add_obs(self, feat: np.ndarray) -> None:
        """Append one observation: a rank-one extension of L^-1 and of V."""
        feat = self.expand(feat[None, :])[0]
        n = self.n
        self.obs[n] = feat
        if n < self.diff.shape[1]:
            d = (self.obs[: n + 1] != feat).T
            if self.odiff is not None:  # every field at once (0 where a field is not ordered)
                o = ((np.abs(self.obs[: n + 1] - feat) * self.steps) ** self.alpha).T
                self.odiff[:, n, : n + 1] = o
                self.odiff[:, : n + 1, n] = o
            self.diff[:, n, : n + 1] = d
            self.diff[:, : n + 1, n] = d
        ell = self.linv[:n, :n] @ self._xkernel(self.obs[:n], feat[None, :])[:, 0]
        delta = math.sqrt(max(1.0 + self.noise - ell @ ell, 1e-9))
        self.linv[n, :n] = -(ell @ self.linv[:n, :n]) / delta
        self.linv[n, n] = 1.0 / delta
        col = (self._xkernel(self.xpool, feat[None, :])[:, 0] - self.v[:, :n] @ ell) / delta
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
        """Length-scales by marginal likelihood: best shared grid value, then one pass per field
        (``adaptive``: each ordered field's pass also tries its ordinal term)."""
        n = len(yn)
        if self.aux and len(live) == self.base_width:  # a derived column is live where it varies
            live = np.concatenate([live, np.ptp(self.xpool[:, self.base_width:], axis=0) > 0])
        diff = self.diff[:, :n, :n].astype(float)
        odiff = self.odiff[:, :n, :n].astype(float) if self.odiff is not None else None

        def nll(theta: np.ndarray, kind: np.ndarray) -> float:
            expo = np.tensordot(np.where(kind, 0.0, theta), diff, 1)
            if odiff is not None and kind.any():
                expo += np.tensordot(np.where(kind, theta, 0.0), odiff, 1)
            k = np.exp(-expo) + self.noise * np.eye(n)
            try:
                chol = np.linalg.cholesky(k)
            except np.linalg.LinAlgError:
                return math.inf
            z = np.linalg.solve(chol, yn)
            return 0.5 * n * math.log(max(z @ z / n, 1e-12)) + float(np.sum(np.log(np.diag(chol))))

        kind = self.kind.copy()
        shared = [np.where(live, g, 0.0) for g in _GRID]
        best_v, best = min(((nll(t, kind), i) for i, t in enumerate(shared)), key=lambda p: p[0])
        theta = shared[best]
        for e in np.nonzero(live)[0]:
            kinds = (False, True) if self.adaptive and self.steps[e] > 0 else (bool(kind[e]),)
            for g in (_GRID if e < self.base_width else (0.0,) + _GRID):  # a derived column may be off
                for k_e in kinds:
                    trial, tkind = theta.copy(), kind.copy()
                    trial[e], tkind[e] = g, k_e
                    v = nll(trial, tkind)
                    if v < best_v:
                        best_v, theta, kind = v, trial, tkind
        self.set_kernel(theta, kind)

    def set_kernel(self, theta: np.ndarray, kind: np.ndarray) -> None:
        """Take these length-scales and term kinds (another GP's fit), rebuilding what depends on them."""
        if not np.array_equal(theta, self.theta) or not np.array_equal(kind, self.kind):
            self.theta, self.kind = theta.copy(), kind.copy()
            n = self.n
            if n == 0:
                return
            k = self._xkernel(self.obs[:n], self.obs[:n]) + self.noise * np.eye(n)
            self.linv[:n, :n] = np.linalg.inv(np.linalg.cholesky(k))
            self.v[:, :n] = self._xkernel(self.xpool, self.obs[:n]) @ self.linv[:n, :n].T
            self.vsq = np.sum(self.v[:, :n] ** 2, 1)

    def predict(self, yn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and standard deviation (amplitude by maximum likelihood) over the pool."""
        z = self.linv[: self.n, : self.n] @ yn
        s2 = max(z @ z / self.n, 1e-12)
        return self.v[:, : self.n] @ z, np.sqrt(s2 * np.maximum(1.0 - self.vsq, 1e-12))

    def predict_at(self, feats: np.ndarray, yn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``predict`` at other points than the pool, which is left as it is."""
        n = self.n
        v = self._xkernel(self.expand(feats), self.obs[:n]) @ self.linv[:n, :n].T
        z = self.linv[:n, :n] @ yn
        s2 = max(z @ z / n, 1e-12)
        return v @ z, np.sqrt(s2 * np.maximum(1.0 - np.sum(v * v, 1), 1e-12))
