"""How kerntune times a kernel on a GPU: one protocol for screening, re-timing and baselines.

Why this shape (the evidence is benchmarks/gpu_protocol/README.md, measured on an H100): a
compute-bound kernel runs at the boost clock (1,980 MHz) for its first ~100 ms after the GPU has
been idle, then the power limit pulls the clock to ~1,500 MHz and its time rises by 13-20%;
memory-bound kernels keep the boost clock.  A short measurement that follows an idle gap (a
config waiting for its compile) therefore reads the boost-clock time, and a longer one that
follows other measurements reads the sustained time: that, not the timer, was the 7-11% gap
between screening and re-timing.  A kernel in a real program runs among others, back to back,
so the sustained state is the one that matches it.  The protocol therefore:

* keeps the GPU loaded between measurements (the benchmark worker re-launches the last kernel
  it measured while it waits for the next compiled config), so no measurement starts rested;
* times every config the same way, screening and re-timing alike: ``warmup_ms`` of the kernel
  itself, then a window of ``rep_ms`` timed by ``triton.testing.do_bench`` (CUDA events around
  each launch, L2 flushed between launches), the window's median;
* re-times the leaders and every baseline in ``rounds`` interleaved rounds in one worker, so they
  share the GPU's state, and reports each figure as the median of its rounds with a
  distribution-free confidence interval; a speedup is the median of the per-round ratios, and
  "faster" is claimed only when its whole interval lies above 1.

The sustained state wanders (the power controller moves the clock by +-100 MHz): a 50 ms window of
a power-limited matmul has a ~2% standard deviation, which is why re-timing takes ten rounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class Protocol:
    """The timing settings every measurement of one run shares."""

    warmup_ms: int = 25
    rep_ms: int = 50
    rounds: int = 10
    keep_warm: bool = True

    def to_dict(self) -> dict[str, object]:
        return {"warmup_ms": self.warmup_ms, "rep_ms": self.rep_ms, "rounds": self.rounds,
                "keep_warm": self.keep_warm}


DEFAULT = Protocol()


@dataclass(frozen=True)
class Estimate:
    """A median with a distribution-free confidence interval (order statistics of the samples)."""

    median: float
    lo: float
    hi: float
    n: int
    level: float

    @property
    def coverage(self) -> float:
        """The coverage the interval actually has (``level`` or more with enough samples; less, down
        to 0 for one sample, where too few samples made the extremes stand in)."""
        lo, _ = _order_ranks(self.n, self.level)
        return 1 - 2 * sum(math.comb(self.n, j) for j in range(lo + 1)) / 2**self.n

    @property
    def halfwidth(self) -> float:
        """Half the interval's width relative to the median (0.012: +-1.2%)."""
        return (self.hi - self.lo) / 2 / self.median if self.median else math.inf

    def __str__(self) -> str:
        return f"{self.median:.4g} [{self.lo:.4g}, {self.hi:.4g}]"


def _order_ranks(n: int, level: float) -> tuple[int, int]:
    """0-based ranks (lo, hi) of the order statistics that bracket the median with at least
    ``level`` coverage: P(lo-th <= median <= hi-th) = 1 - 2 P(Binomial(n, 1/2) <= lo).
    With too few samples for that coverage the extremes are returned (the coverage is then
    lower than asked; ``Estimate.n`` tells the reader)."""
    alpha = (1 - level) / 2
    k, cdf = 0, 0.0
    while k < n:
        p = math.comb(n, k) / 2**n
        if cdf + p > alpha:
            break
        cdf += p
        k += 1
    # k is the largest count with P(B <= k-1) <= alpha: the k-th smallest sample (1-based) and
    # its mirror keep the coverage; k = 0 means no pair does, and the extremes stand in.
    lo = max(k - 1, 0)
    return lo, n - 1 - lo


def estimate(samples: Sequence[float], level: float = 0.95) -> Estimate:
    """The median of ``samples`` and a ``level`` confidence interval for it."""
    xs = sorted(x for x in (float(x) for x in samples) if not math.isnan(x))  # a NaN breaks the sort
    if not xs:
        raise ValueError("no samples")
    n = len(xs)
    med = xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2
    lo, hi = _order_ranks(n, level)
    return Estimate(med, xs[lo], xs[hi], n, level)


def speedup(baseline: Sequence[float], candidate: Sequence[float], level: float = 0.95) -> Estimate:
    """Baseline time over candidate time, paired round by round (a round's two windows saw the
    same GPU state, so their ratio cancels most of the drift between rounds).  A round where either
    time is not a positive finite number (zero, NaN, inf) gives no ratio and is left out of the pairs."""
    if len(baseline) != len(candidate):
        raise ValueError(f"paired rounds needed: {len(baseline)} baseline, {len(candidate)} candidate")
    ratios = [float(b) / float(c) for b, c in zip(baseline, candidate) if _usable(b) and _usable(c)]
    if not ratios:
        raise ValueError("no round timed both sides")
    return estimate(ratios, level)


def _usable(t: float) -> bool:
    return math.isfinite(float(t)) and float(t) > 0


def verdict(s: Estimate) -> str:
    """'faster' or 'slower' only beyond the interval, and only where enough rounds give the interval
    its promised coverage (6 at 95%: with fewer the extremes stand in, and one round's "interval" is a
    point); otherwise 'same within noise'."""
    if s.coverage < s.level:
        return "same within noise"
    if s.lo > 1:
        return "faster"
    if s.hi < 1:
        return "slower"
    return "same within noise"
