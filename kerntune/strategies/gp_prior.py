"""What past runs on nearby shapes predict for a new shape: the prior mean of ``bayes``'s GP.

Each past run (``ctx.transfer``: config key -> log(time / that run's best)) gets its own GP (the
same Hamming kernel, its own length-scales); its prediction for every config of the new shape is
the run's opinion.  Two corrections make the opinions safe to combine, both chosen on the recorded
H100 matmul shapes (``benchmarks/results/warm_start.md``, second round):

* Shrinkage.  Far from what a run measured its GP reverts to the run's mean, and that mean is set
  by the slow configs the run happened to try, so it is confidently pessimistic about regions it
  never visited (3.7x predicted for a config that is 1.03x).  A prediction is pulled towards a
  neutral value, the run's ``NEUTRAL_Q`` quantile over all configs, with weight
  ``sd^2 / (SHRINK_S0^2 + sd^2)``: trusted near the run's data, neutral-to-hopeful elsewhere.
* Distance weights.  Runs are averaged with weights ``exp(-distance / DISTANCE_TAU)``, distance
  being ``kerntune.run.warm_start.shape_distance`` (doubling one dimension costs 1), so the nearest
  shape speaks loudest.

The GP then models only what the prior gets wrong (a zero-mean GP on the residuals).  Measured
against the earlier design (the past measurements as a second task of one GP), in evaluations to
within 2% of the third shape's optimum (median of 20 seeds, budget 200; cold GP 73 / 42.5 / 35.5 for
4096^3 / 8192x8192x512 / 256x8192x8192): 11.5 / 122 / 9 with the benchmark's past runs against
18 / 106.5 / 68.5, and 15.5 / 100.5 / 13.5 against 27.5 / 26 / 55 with past runs redone per seed.
It loses where the past runs never measured the new shape's optimal region (8192x8192x512 in 11 of
20 seeds): nothing tells the model to go there, and the cold GP's exploration finds it sooner.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from kerntune.space import Space
from kerntune.strategies.gp_model import _GP, _encode

SHRINK_S0 = 0.05     # log units: a run's prediction is trusted where its sd is below about this
NEUTRAL_Q = 0.25     # the neutral value: this quantile of the run's predictions over the pool
DISTANCE_TAU = 2.0   # runs weighted by exp(-shape distance / this)
MIN_FINITE = 3       # a run with fewer finite measurements says nothing


class PastPrior:
    """Per-run GPs over the past runs' finite log-ratios and their shrunk, distance-weighted mean."""

    def __init__(self, space: Space, transfer: Sequence[dict[str, float]], live: np.ndarray) -> None:
        self.runs: list[tuple[_GP, np.ndarray, float, float, float]] = []  # gp, its standardised log-ratios, their mean and std, the run's weight
        for run in transfer:
            finite = [(k, v) for k, v in run.items() if math.isfinite(v)]
            if len(finite) < MIN_FINITE:
                continue
            y = np.array([v for _, v in finite])
            gp = _GP(space.encoded_width, len(finite))
            for f in _encode(space, [space.from_key(k) for k, _ in finite]):
                gp.add_obs(f)
            std = float(y.std()) or 1.0
            yn = (y - y.mean()) / std
            gp.refit(yn, live)
            distance = float(getattr(run, "distance", 0.0))
            self.runs.append((gp, yn, float(y.mean()), std, math.exp(-distance / DISTANCE_TAU)))
        self.neutral: list[float] = []

    def __bool__(self) -> bool:
        return bool(self.runs)

    def _opinions(self, feats: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        mus, sds = [], []
        for gp, yn, mean, std, _ in self.runs:
            mu, sd = gp.predict_at(feats, yn)
            mus.append(mu * std + mean)
            sds.append(sd * std)
        return np.array(mus), np.array(sds)

    def predict(self, feats: np.ndarray) -> np.ndarray:
        """The prior log-ratio of each row of ``feats`` (encoded configs).  The first call should be
        the whole pool: it fixes each run's neutral value, which later calls (configs added to the
        pool) reuse."""
        mus, sds = self._opinions(feats)
        if not self.neutral:
            self.neutral = [float(np.quantile(m, NEUTRAL_Q)) for m in mus]
        trust = SHRINK_S0 ** 2 / (SHRINK_S0 ** 2 + sds ** 2)
        shrunk = trust * mus + (1.0 - trust) * np.array(self.neutral)[:, None]
        w = np.array([r[4] for r in self.runs])
        return (w / w.sum()) @ shrunk
