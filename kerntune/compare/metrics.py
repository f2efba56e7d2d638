"""The numbers the field compares tuners by.

Methodology score (Kernel Tuner's autotuning methodology, evaluations form):

    P(n) = (f_random(n) - f_strategy(n)) / (f_random(n) - f_opt)

where f_strategy(n) is the mean over repeats of the best time after n
evaluations and f_random(n) the *expected* best of n random draws without
replacement, computed exactly from the recording.  0 means as good as random
search, 1 means the optimum from the first evaluation.  The score is the mean
of P(n) for n = 1 .. N*, where the cutoff N* is the number of random draws
expected to reach f_opt + 0.05·(median − f_opt) (capped at the budget).

Failed configs count as evaluations; until a run has a successful trial its
best is taken as the worst recorded successful time — for random search and
for the strategy alike — so both curves are finite and comparable.

Where every successful config has the same time there is nothing to rank and
the score is undefined: NaN here, "n/a (all successful configs tie)" in the
compare table and the report, null in JSON.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Sequence

import numpy as np

#: What the compare table and the report print for an undefined score (NaN: ``Reference.usable_gaps`` has none).
UNDEFINED_SCORE = "n/a (all successful configs tie)"


def score_defined(score: float | None) -> bool:
    """Whether ``score`` is a score: NaN is the undefined one (every successful config ties)."""
    return score is not None and not math.isnan(score)


@dataclass(frozen=True)
class Reference:
    """What a recording says about its space: all outcomes, optimum, median."""

    values: np.ndarray     # one entry per recorded config; failures as the worst ok time
    optimum: float
    median: float
    worst: float

    @classmethod
    def from_times(cls, ok_times: Sequence[float], n_failed: int) -> "Reference":
        ok = np.sort(np.asarray(ok_times, dtype=float))
        worst = float(ok[-1])
        values = np.concatenate([ok, np.full(n_failed, worst)])
        return cls(values=np.sort(values), optimum=float(ok[0]), median=float(np.median(ok)), worst=worst)

    def random_expectation(self, max_n: int) -> np.ndarray:
        """E[min of n draws without replacement] for n = 1..max_n (exact).

        With values sorted ascending v_1..v_N, P(min = v_i) = C(N-i, n-1)/C(N, n).
        """
        v = self.values
        big_n = len(v)
        max_n = min(max_n, big_n)
        i = np.arange(1, big_n + 1)
        out = np.empty(max_n)
        logfact = np.array([math.lgamma(k + 1) for k in range(big_n + 1)])  # log(k!)

        def log_comb(a: np.ndarray, b: int) -> np.ndarray:
            res = np.full(a.shape, -np.inf)
            ok = a >= b
            res[ok] = logfact[a[ok]] - logfact[b] - logfact[a[ok] - b]
            return res

        for n in range(1, max_n + 1):
            logp = log_comb(big_n - i, n - 1) - log_comb(np.array([big_n]), n)[0]
            out[n - 1] = float(np.sum(np.exp(logp) * v))
        return out

    def cutoff(self, max_n: int) -> int:
        """Random draws expected to reach f_opt + 5% of (median - f_opt).

        Where at least half the values tie exactly at the optimum (median == optimum: a coarse timer),
        the threshold is the optimum itself, which the exact expectation reaches only when every other
        value is drawn, and float rounding decided the cutoff; there the cutoff is the expected rank of
        the first draw at or below the threshold, ``ceil((N + 1) / (N + 1 - i))`` with ``i`` of the
        ``N`` values above it, so random search still scores about 0.  This is one draw more than the
        autotuning_methodology package's ``cutoff_point``, ``ceil(i / (N + 1 - i))``: that counts the
        draws *before* the first hit (the expected misses), not the hit itself.  Why it differs: that
        rule gave 1 on every such recording without failures (``i <= N / 2``), so the score rested on
        the first evaluation alone, the default config for every strategy but random."""
        threshold = self.optimum + 0.05 * (self.median - self.optimum)
        if self.median <= self.optimum:
            above = int(np.count_nonzero(self.values > threshold))
            big_n = len(self.values)
            return max(1, min(max_n, math.ceil((big_n + 1) / (big_n + 1 - above))))
        expect = self.random_expectation(max_n)
        hits = np.nonzero(expect <= threshold)[0]
        return int(hits[0]) + 1 if len(hits) else max_n

    def usable_gaps(self, denom: np.ndarray) -> np.ndarray:
        """Budgets whose random-search gap above the optimum is more than rounding: an absolute 1e-12
        let gaps of 1e-12..1e-9 ms divide the score into noise.  The floor is scaled by the times
        themselves as well as by their spread: scaled by the spread alone it was ~1e-309 where all
        successful configs tie, the expectation's rounding noise (~1e-14 of the time) passed as a gap,
        and every strategy, random included, scored noise / noise = 1.000."""
        scale = max(self.worst - self.optimum, abs(self.worst), abs(self.optimum))
        return denom > 1e-9 * scale


def best_so_far(times: Sequence[float | None], fill: float) -> np.ndarray:
    """Best time after each evaluation; ``None`` (failed) and the start count as ``fill``."""
    out = np.empty(len(times))
    best = fill
    for k, t in enumerate(times):
        if t is not None and t < best:
            best = t
        out[k] = best
    return out


def methodology_score(curves: Sequence[np.ndarray], ref: Reference, budget: int) -> tuple[float, int]:
    """(score, cutoff used).  Curves shorter than the range hold their last value.  The score is NaN
    (undefined) where no budget has a gap to random search: every successful config ties."""
    cutoff = min(ref.cutoff(max(budget, 1)), budget)
    mean = np.mean([_pad(c, cutoff, ref.worst) for c in curves], axis=0)
    expect = ref.random_expectation(cutoff)
    denom = expect - ref.optimum
    mask = ref.usable_gaps(denom)
    if not mask.any():
        return math.nan, cutoff
    scores = (expect[mask] - mean[mask]) / denom[mask]
    return float(np.mean(scores)), cutoff


@dataclass(frozen=True)
class ScoreSpread:
    """A methodology score with how far it can be trusted.

    The score is linear in the mean curve, so it is also the mean of the per-repeat
    scores; their standard error and a bootstrap interval over repeats say how much
    the score would move with other seeds.  On heavy-tailed spaces one lucky repeat
    moves the mean a lot: random search itself scored 0.42 over 10 repeats and -0.11
    over 100 on one recorded space, so a score without its spread means little.
    """

    score: float
    stderr: float
    ci_low: float
    ci_high: float
    repeats: int
    per_repeat: tuple[float, ...]

    def to_dict(self) -> dict[str, object]:
        """An undefined score (NaN, all configs tie) and its spread as null: JSON has no NaN."""
        def nan_null(x: float) -> float | None:
            return None if math.isnan(x) else x

        return {"score": nan_null(self.score), "stderr": nan_null(self.stderr),
                "ci95": [nan_null(self.ci_low), nan_null(self.ci_high)], "repeats": self.repeats}


def score_spread(curves: Sequence[np.ndarray], ref: Reference, budget: int, resamples: int = 2000,
                 seed: int = 0, level: float = 0.95) -> ScoreSpread:
    """Methodology score, its standard error over repeats and a percentile bootstrap
    interval at ``level`` (repeats resampled with replacement; 95% in reports).  One repeat has no spread: stderr is
    then inf and the interval (-inf, inf).  Where no budget has a gap to random search (every successful
    config ties) score, spread and interval are NaN: undefined, where they read 0 or 1."""
    cutoff = min(ref.cutoff(max(budget, 1)), budget)
    expect = ref.random_expectation(cutoff)
    denom = expect - ref.optimum
    mask = ref.usable_gaps(denom)
    if not mask.any():
        nan = math.nan
        return ScoreSpread(nan, nan, nan, nan, len(curves), tuple(nan for _ in curves))
    padded = np.array([_pad(c, cutoff, ref.worst) for c in curves])
    per = np.mean((expect[mask] - padded[:, mask]) / denom[mask], axis=1)
    return spread_of(per, resamples, seed, level)


def spread_of(per_repeat: Sequence[float], resamples: int = 2000, seed: int = 0, level: float = 0.95) -> ScoreSpread:
    """The score and spread of these per-repeat scores (``score_spread``'s second half): runs of one
    strategy on one space made apart, at other seeds, pool into one score by their repeats' scores."""
    per = np.asarray(per_repeat, dtype=float)
    score = float(per.mean()) if len(per) else 0.0
    n = len(per)
    if n < 2:
        return ScoreSpread(score, math.inf, -math.inf, math.inf, n, tuple(map(float, per)))
    se = float(per.std(ddof=1) / math.sqrt(n))
    rng = np.random.default_rng(seed)
    boots = per[rng.integers(0, n, size=(resamples, n))].mean(axis=1)
    tail = 50.0 * (1.0 - level)
    lo, hi = np.percentile(boots, [tail, 100.0 - tail])
    return ScoreSpread(score, se, float(lo), float(hi), n, tuple(map(float, per)))


def _pad(curve: np.ndarray, n: int, fill: float) -> np.ndarray:
    if len(curve) >= n:
        return curve[:n]
    last = curve[-1] if len(curve) else fill
    return np.concatenate([curve, np.full(n - len(curve), last)])


def evals_to_within(curve: np.ndarray, optimum: float, pct: float) -> int | None:
    """First evaluation (1-based) whose best is within ``pct`` of the optimum."""
    hits = np.nonzero(curve <= optimum * (1 + pct / 100.0))[0]
    return int(hits[0]) + 1 if len(hits) else None


def median_or_none(values: Sequence[int | None]) -> float | None:
    """Median where 'never reached' counts as infinitely late; None if the median never reached."""
    keyed = sorted(math.inf if v is None else v for v in values)
    med = statistics.median(keyed) if keyed else math.inf
    return None if math.isinf(med) else float(med)
