"""The seventeenth design pass's opt-in pieces of ``auto``'s engine (issue 24, acceptance 1;
``benchmarks/search_quality/README.md``, "Seventeenth pass"), off by default.

``Fusion`` (``fuse``): a second GP, the plain ``gp``'s model by default (log-time targets, Hamming
kernel: ``fuse_warp``, ``fuse_ordinal``), is fitted beside the engine's own (copula targets, ordinal
kernel) on the same measurements, and every GP step (global, and local with ``fuse_local``) takes the
candidate that the two acquisitions agree on, instead of either model's own argmin.  Earlier passes
gave the steps to one model or the other (a fixed share, a predictive score, the probability of
improvement); here no model ever picks alone.  Over the candidates the step may take, each model's
LCB is turned into a rank percentile (its own targets' scale does not matter), and

* "rank_max": the pick minimises the worse of its two percentiles (a config both models rank high:
  the most balanced point of the two LCBs' Pareto front), ties by the sum;
* "rank_sum": the pick minimises the sum of the percentiles (Borda count);
* "pi_prod": the pick maximises the product of the two probabilities of improvement, each under its
  own model and targets (both must believe in an improvement);
* "twin": the second GP's LCB alone picks (a schedule of the two models, with ``fuse_from`` and
  ``fuse_until``);
* "disagree": query by committee: with chance ``fuse_share`` a step takes, among the candidates in
  either model's top ``fuse_top`` fraction, the one the two models rank most differently (the
  measurement that best tells the models apart); the other steps are the engine's own.

Every rule acts only while the measured configs number at least ``fuse_from`` and fewer than
``fuse_until`` (None: to the end); outside that window the engine's GP picks alone.

``TrustRegion`` (``tr``): a TuRBO / CASMOPOLITAN-style trust region replaces the stall rule.  The GP's
global steps are restricted to configs within ``radius`` fields of the region's incumbent; ``tr_succ``
consecutive gains widen it by one field (at most ``tr_init``, by default the number of fields that
can change), ``tr_fail`` consecutive evaluations
without gain narrow it by one (default: ``stall_after / tr_init`` rounded up, so that a region
with no gain collapses after about as many evaluations as the stall rule waits); when it falls below ``tr_min`` the region collapses, and the engine's
restart (tabu, exploratory first point, fresh region) follows, with the radius back at ``tr_init``.
``kernel_tabu`` (``tabu_kernel``): the restarts' tabu region in the model's own terms.  The engine
closes a Hamming ball of ``tabu_radius`` fields around each basin it leaves; a GP whose fitted
length-scales say that a basin is defined by two or three fields (and that the others barely matter)
keeps proposing configs of the same basin just outside the ball.  With ``tabu_kernel`` tau, every
config whose kernel correlation with a tabu centre is at least tau, under the current fit, is closed
to the GP's global steps too (the Hamming ball stays); as the fit changes, so does the closed set.

Nothing here reads anything about a space beyond its number of fields."""

from __future__ import annotations

import math

import numpy as np

from kerntune.strategies.gp_model import _FIT_UNTIL, _NOISE, _GP, ordinal_steps
from kerntune.strategies.surrogate_aux import _phi_cdf, warp

FUSE_RULES = ("off", "rank_max", "rank_sum", "pi_prod", "twin", "disagree")


def _percentile(s: np.ndarray) -> np.ndarray:
    """Rank percentile (0 best) of each entry of ``s`` (ties share their mean rank)."""
    order = np.argsort(s, kind="stable")
    r = np.empty(len(s))
    r[order] = np.arange(len(s), dtype=float)
    _, inv, counts = np.unique(s, return_inverse=True, return_counts=True)
    if (counts > 1).any():
        r = (np.bincount(inv, weights=r) / counts)[inv]
    return (r + 0.5) / len(s)


class Fusion:
    """The second GP and the fused pick (``SurrogateOptions.fuse``)."""

    def __init__(self, space, cap: int, opts, rng) -> None:
        self.opts, self.rng = opts, rng
        self.gp = _GP(space.encoded_width, cap, _NOISE, steps=ordinal_steps(space), alpha=opts.fuse_ordinal,
                      adaptive=opts.gp_ordinal_fit)
        self.fit_n = -opts.refit_every
        self.picks = self.moved = 0  # fused picks, and those that differ from the engine's own argmin

    def add_pool(self, feats: np.ndarray) -> None:
        self.gp.add_pool(feats)

    def add_obs(self, feat: np.ndarray) -> None:
        if self.gp.n < self.gp.cap:
            self.gp.add_obs(feat)

    def posterior(self, ys: list[float], live: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        y = warp(np.array(ys[: self.gp.n]), self.opts.fuse_warp, self.opts.y_clip)
        yn = (y - y.mean()) / (y.std() or 1.0)
        if self.gp.n - self.fit_n >= self.opts.refit_every and self.gp.n <= _FIT_UNTIL:
            self.gp.refit(yn, live)
            self.fit_n = self.gp.n
        mu, sd = self.gp.predict(yn)
        return mu, sd, float(np.min(yn))

    def pick(self, score: np.ndarray, mu: np.ndarray, sd: np.ndarray, best: float, kappa: float,
             ys: list[float], live: np.ndarray, measured: int) -> int | None:
        """The fused pick among the finite entries of ``score`` (the engine's LCB with its blocks at
        inf); ``mu``, ``sd``, ``best``: the engine's posterior and best target."""
        allowed = np.isfinite(score)
        o = self.opts
        if allowed.sum() < 2 or self.gp.n < 2 or measured < o.fuse_from or (o.fuse_until is not None and measured >= o.fuse_until):
            return None
        idx = np.nonzero(allowed)[0]
        mu2, sd2, best2 = self.posterior(ys, live)
        rule = self.opts.fuse
        if rule == "disagree":
            if self.rng.random() >= o.fuse_share:
                return None
            r1, r2 = _percentile(score[idx]), _percentile((mu2 - kappa * sd2)[idx])
            val = np.where(np.minimum(r1, r2) <= o.fuse_top, -np.abs(r1 - r2), np.inf)
        elif rule == "twin":
            val = (mu2 - kappa * sd2)[idx]
        elif rule == "pi_prod":
            p1 = _phi_cdf((best - mu[idx]) / np.maximum(sd[idx], 1e-12))
            p2 = _phi_cdf((best2 - mu2[idx]) / np.maximum(sd2[idx], 1e-12))
            val = -(np.log(np.maximum(p1, 1e-300)) + np.log(np.maximum(p2, 1e-300)))
        else:
            r1 = _percentile(score[idx])
            r2 = _percentile((mu2 - kappa * sd2)[idx])
            val = np.maximum(r1, r2) + 1e-3 * (r1 + r2) if rule == "rank_max" else r1 + r2
        pick = int(idx[int(np.argmin(val))])
        self.picks += 1
        self.moved += pick != int(np.argmin(score))
        return pick


def kernel_tabu(model: _GP, centres: list[np.ndarray], tau: float) -> np.ndarray:
    """Pool entries whose kernel correlation with any of ``centres`` is at least ``tau``."""
    out = np.zeros(len(model.pool), dtype=bool)
    for c in centres:
        out |= model.kernel(model.pool, c[None, :])[:, 0] >= tau
    return out


class TrustRegion:
    """The trust region's radius and its success / failure counters (``SurrogateOptions.tr``)."""

    def __init__(self, n_fields: int, stall_after: int, opts) -> None:
        self.init = opts.tr_init if opts.tr_init is not None else n_fields
        # by default a region with no gain collapses after about the stall rule's evaluations
        self.fail_tol = opts.tr_fail if opts.tr_fail is not None else max(1, math.ceil(stall_after / self.init))
        self.succ_tol, self.min = opts.tr_succ, opts.tr_min
        self.radius = self.init
        self.succ = self.fail = 0
        self.collapses = 0

    def update(self, gained: bool) -> bool:
        """One own evaluation; True when the region has collapsed (the engine restarts)."""
        if gained:
            self.succ, self.fail = self.succ + 1, 0
            if self.succ >= self.succ_tol:
                self.radius, self.succ = min(self.radius + 1, self.init), 0
            return False
        self.succ, self.fail = 0, self.fail + 1
        if self.fail >= self.fail_tol:
            self.radius, self.fail = self.radius - 1, 0
            if self.radius < self.min:
                self.radius = self.init
                self.collapses += 1
                return True
        return False

    def outside(self, pool: np.ndarray, centre: np.ndarray) -> np.ndarray:
        """Pool entries more than ``radius`` columns from ``centre``."""
        return np.sum(pool != centre, axis=1) > self.radius
