"""Speedup verdicts and intervals (kerntune.evaluate.protocol): no "faster" from too few rounds, and
rounds with unusable times (zero, NaN, inf) neither crash nor scramble the interval."""

from __future__ import annotations

import math

import pytest

from kerntune.evaluate.protocol import estimate, speedup, verdict


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_too_few_rounds_never_claim_faster_or_slower(n: int) -> None:
    # every round agrees, but n < 6 rounds cannot give a 95% interval of the median: its "interval"
    # is the extremes (one round: a point), with coverage 1 - 2/2**n
    s = speedup([1.1] * n, [1.0] * n)
    assert verdict(s) == "same within noise"
    assert verdict(speedup([0.9] * n, [1.0] * n)) == "same within noise"


def test_enough_rounds_still_claim_faster_and_slower() -> None:
    assert verdict(speedup([1.1] * 6, [1.0] * 6)) == "faster"
    assert verdict(speedup([0.9] * 10, [1.0] * 10)) == "slower"


def test_a_zero_time_round_is_left_out_of_the_pairs_not_a_crash() -> None:
    base = [1.2] * 10
    cand = [1.0] * 9 + [0.0]
    s = speedup(base, cand)
    assert s.n == 9 and s.median == pytest.approx(1.2)


@pytest.mark.parametrize("pos", [0, 5, 9])
def test_a_nan_round_does_not_scramble_the_interval(pos: int) -> None:
    xs = [1.0, 0.5, 2.0, 3.0, 1.5, 1.2, 0.9, 1.1, 1.3, 1.4]
    xs[pos] = math.nan
    e = estimate(xs)
    assert all(math.isfinite(v) for v in (e.median, e.lo, e.hi)) and e.lo <= e.median <= e.hi and e.n == 9
    cand = [1.0] * 10
    cand[pos] = math.nan
    s = speedup([1.2] * 10, cand)
    assert s.n == 9 and s.lo == pytest.approx(1.2)
    with pytest.raises(ValueError):
        speedup([1.0, math.inf], [0.0, 1.0])
