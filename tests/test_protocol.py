"""The timing protocol's statistics (kerntune.evaluate.protocol): intervals, speedups, verdicts.

Real numbers, no GPU: the coverage test draws thousands of samples from known distributions and
checks that the intervals hold the true median as often as they promise.
"""

from __future__ import annotations

import collections
import math
import random
import statistics
import time

import pytest

from kerntune.evaluate.protocol import Protocol, estimate, speedup, verdict
from kerntune.evaluate.retime import leaders
from kerntune.evaluate.trial import Status, Trial


def test_interval_brackets_the_median_with_order_statistics() -> None:
    xs = [1.0, 5.0, 2.0, 4.0, 3.0, 9.0, 7.0, 6.0, 8.0, 10.0]
    e = estimate(xs)
    assert e.median == pytest.approx(5.5)
    # n = 10 at 95%: the 2nd and 9th smallest (coverage 1 - 2 * 11/1024 = 97.9%)
    assert (e.lo, e.hi) == (2.0, 9.0)
    assert e.n == 10 and e.lo <= e.median <= e.hi


def test_too_few_samples_fall_back_to_the_extremes() -> None:
    e = estimate([3.0, 1.0, 2.0])
    assert (e.lo, e.median, e.hi) == (1.0, 2.0, 3.0)
    with pytest.raises(ValueError):
        estimate([])


@pytest.mark.parametrize("n", [6, 10, 25])
def test_interval_coverage_is_at_least_what_it_promises(n: int) -> None:
    rng = random.Random(n)
    hits, trials = 0, 4000
    true_median = math.exp(0.0)  # lognormal(0, 0.3): a skewed, timing-like distribution
    for _ in range(trials):
        e = estimate([rng.lognormvariate(0.0, 0.3) for _ in range(n)])
        hits += e.lo <= true_median <= e.hi
    assert hits / trials >= 0.95 - 3 * math.sqrt(0.05 * 0.95 / trials)


def test_speedup_pairs_rounds_and_cancels_shared_drift() -> None:
    # The GPU's state drifts by 20% across rounds; the candidate is 10% faster in every round.
    drift = [1.0, 1.2, 0.9, 1.1, 1.15, 0.95, 1.05, 1.0, 1.2, 0.85]
    base = [0.2 * d for d in drift]
    cand = [0.2 / 1.1 * d for d in drift]
    s = speedup(base, cand)
    assert s.median == pytest.approx(1.1) and s.lo == pytest.approx(1.1) and verdict(s) == "faster"
    # unpaired, the same numbers could not tell the two apart
    assert estimate(base).lo < estimate(cand).hi


def test_verdicts_need_the_whole_interval_beyond_one() -> None:
    assert verdict(speedup([1.0, 1.02, 0.99, 1.01, 1.0, 0.98], [1.0] * 6)) == "same within noise"
    assert verdict(speedup([0.8] * 6, [1.0] * 6)) == "slower"
    with pytest.raises(ValueError):
        speedup([1.0, 2.0], [1.0])


def test_protocol_defaults_are_one_setting_for_screening_and_retiming() -> None:
    p = Protocol()
    assert p.to_dict() == {"warmup_ms": p.warmup_ms, "rep_ms": p.rep_ms, "rounds": p.rounds, "keep_warm": True}
    assert p.rounds >= 6  # fewer rounds cannot give a 95% interval of the median


def test_leaders_are_distinct_and_fastest_first() -> None:
    hist = [Trial({"a": 1}, Status.OK, 2.0), Trial({"a": 2}, Status.OK, 1.0), Trial({"a": 1}, Status.OK, 1.5),
            Trial({"a": 3}, Status.RUNTIME_ERROR), Trial({"a": 4}, Status.OK, 3.0)]
    assert leaders(hist, 2) == [{"a": 2}, {"a": 1}]
    assert leaders(hist, 10) == [{"a": 2}, {"a": 1}, {"a": 4}]


def test_leaders_of_several_gpus_take_each_gpus_ranking_in_turn() -> None:
    # GPU 1 runs faster: by time alone its three configs would take every leader's place.
    fast = [Trial({"a": i}, Status.OK, 1.0 + i / 100, extra={"gpu": 1}) for i in range(3)]
    slow = [Trial({"a": 10 + i}, Status.OK, 1.05 + i / 100, extra={"gpu": 0}) for i in range(3)]
    hist = slow + fast + [Trial({"a": 0}, Status.OK, 1.04, extra={"gpu": 0})]  # a repeat on the other GPU
    assert leaders(hist, 3) == [{"a": 0}, {"a": 10}, {"a": 1}]
    assert leaders(hist, 6) == [{"a": 0}, {"a": 10}, {"a": 1}, {"a": 11}, {"a": 2}, {"a": 12}]
    # one GPU, some trials naming it and some not (a resumed run): one ranking, fastest first
    one = [Trial({"a": i}, Status.OK, 1.0 + i / 100, extra={"gpu": 0} if i % 2 else {}) for i in range(4)]
    assert leaders(one, 3) == [{"a": 0}, {"a": 1}, {"a": 2}]


def test_keep_warm_runs_the_last_kernel_while_idle_then_rests() -> None:
    import time

    from kerntune.evaluate.triton_backend.worker import KeepWarm

    calls = []
    keep = KeepWarm(True, limit_s=0.2, rested_warmup_ms=300)
    assert keep.warmup_ms(25) == 300  # nothing measured yet: the GPU may have rested
    assert not keep.step(lambda: None)  # nothing to run yet
    keep.set(lambda: calls.append(1), median_ms=2.0)  # about 10 ms of launches per step
    assert keep.warmup_ms(25) == 25
    assert keep.step(lambda: None) and len(calls) == 5 and keep.dirty
    time.sleep(0.25)
    assert not keep.step(lambda: None) and keep.warmup_ms(25) == 300  # idle too long: rested again
    off = KeepWarm(False)
    off.set(lambda: calls.append(1), 1.0)
    assert not off.step(lambda: None) and off.warmup_ms(25) == 25


def test_read_tasks_warms_only_while_no_task_waits() -> None:
    import os
    import threading
    import time

    from kerntune.evaluate.triton_backend.worker import read_tasks

    r, w = os.pipe()
    idles = []

    def idle() -> bool:
        idles.append(time.monotonic())
        time.sleep(0.01)
        return len(idles) < 1000

    def writer() -> None:
        time.sleep(0.1)
        os.write(w, b'{"a": 1}\n{"a": 2}\n')
        time.sleep(0.1)
        os.close(w)

    threading.Thread(target=writer).start()
    lines = list(read_tasks(r, idle))
    os.close(r)
    assert lines == [b'{"a": 1}', b'{"a": 2}']
    assert 3 <= len(idles) < 1000  # it warmed while it waited, and stopped at end of input


def test_the_judge_rotates_the_order_and_pairs_every_ratio_by_round() -> None:
    """kerntune.evaluate.judge: each candidate one window a round, never always after the same one,
    and ratios taken round by round (a drift that slows every candidate alike cancels)."""
    from kerntune.evaluate.judge import summarize, time_interleaved
    from kerntune.evaluate.protocol import Protocol

    order: list[str] = []
    drift = [1.0]

    def bench(fn, rep_ms, warmup_ms):  # a GPU whose clock sags a little with every window
        name = fn()
        order.append(name)
        drift[0] *= 1.01
        return [{"fast": 1.0, "slow": 1.2, "ref": 2.0}[name] * drift[0]] * 3

    cands = {n: (lambda n=n: n) for n in ("fast", "slow", "ref")}
    rounds = time_interleaved(cands, bench, Protocol(rounds=6))
    assert order[0] == "fast" and len(order) == 1 + 3 * 6  # one warm-up, then 6 rounds of 3
    firsts = {order[1 + 3 * r] for r in range(6)}
    assert firsts == {"fast", "slow", "ref"}  # every candidate leads some round
    assert all(len(v) == 6 for v in rounds.values())
    out = summarize(rounds, {"speedup": ("slow", "fast"), "missing": ("slow", "nobody")})
    assert "missing" not in out
    assert abs(out["speedup"]["median"] - 1.2) < 0.03  # paired: the 1%-a-window drift barely shows
    assert out["speedup"]["n"] == 6 and out["fast"]["ci_ms"][0] <= out["fast"]["ms"] <= out["fast"]["ci_ms"][1]


# --- the runoff's statistics (kerntune.evaluate.runoff): paired ratios, the leader, when to stop


def test_runoff_pairs_cycles_and_skips_a_cycle_a_contender_missed() -> None:
    from kerntune.evaluate.runoff import paired

    rounds = {"a": [2.0, 4.0, None], "b": [2.2, 4.0, 3.0]}
    assert paired(rounds, "a", "b") == pytest.approx([1.1, 1.0])


def test_runoff_leader_follows_paired_ratios_not_raw_times() -> None:
    """a is ahead in two cycles of three; b's median raw time is lower only because the GPU was slow
    for a in cycle 2 (7.3 against 9.0): the raw medians would pick b, the paired ratios pick a."""
    from kerntune.evaluate.runoff import leader

    assert leader({"a": [7.0, 9.0, 9.0], "b": [7.2, 7.3, 9.2]}, ["a", "b"]) == "a"
    drift = [1.0, 1.0, 1.3, 1.3, 1.3]
    rounds = {"a": [7.0 * d for d in drift], "b": [7.21 * d for d in drift]}
    assert leader(rounds, ["b", "a"]) == "a"
    # three contenders: the one that beats both in the median round
    rounds["c"] = [7.1 * d for d in drift]
    assert leader(rounds, ["b", "c", "a"]) == "a"
    # a contender whose relaunches all failed cannot lead
    rounds["d"] = [None] * 5
    assert leader(rounds, ["d", "a", "b"]) == "a"


def test_runoff_standing_settles_ties_and_contenders_behind_but_not_noise() -> None:
    from kerntune.evaluate.runoff import standing

    lead = [7.0, 7.1, 6.9]
    # (three samples: the interval is their range) within 2% of 1: a tie, settled; above 1: out
    tie = {"a": lead, "b": [7.05, 7.0, 7.0]}
    assert standing(tie, ["a", "b"]) == ("a", [], True)
    behind = {"a": lead, "b": [7.3, 7.5, 7.1]}
    assert standing(behind, ["a", "b"]) == ("a", ["b"], True)
    # the ratios scatter by +-5% around 1.04: unsettled, another round is due
    noisy = {"a": lead, "b": [7.6, 6.9, 7.2]}
    lead_name, out, settled = standing(noisy, ["a", "b"])
    assert lead_name == "a" and out == [] and not settled


def _takes(ms: float):
    """A call that takes ``ms`` on the wall clock: a launch of known cost without a GPU.  It sleeps
    rather than busy-waits: a busy wait descheduled on a shared CPU reads several times its cost, and the
    suite runs tests side by side; a sleep's wake-up comes late by a fraction of a millisecond."""
    def fn() -> None:
        time.sleep(ms / 1000)
    return fn


def test_runoff_interleaves_launches_in_rotated_order_and_times_each() -> None:
    """Without a GPU each launch is timed on the wall clock: two calls of known cost, launched in turn
    (the order rotated every cycle), come out in their ratio, and the leader is the cheaper one."""
    from kerntune.evaluate.runoff import interleaved, leader

    seen: list[str] = []

    def call(name: str, ms: float):
        wait = _takes(ms)

        def fn() -> None:
            seen.append(name)
            wait()
        return fn

    slow, fast = interleaved([call("slow", 4.0), call("fast", 2.0)], cycles=8, warm_cycles=1)
    assert len(slow) == len(fast) == 8
    assert seen[:2] == ["slow", "fast"]  # the warm-up cycle, untimed
    assert seen[2:] == ["slow", "fast", "fast", "slow"] * 4  # each cycle starts one call later
    # (a sleep wakes late on a busy CPU, hence the wide band)
    assert 1.4 < statistics.median(s / f for s, f in zip(slow, fast)) < 3.0
    assert leader({"slow": list(slow), "fast": list(fast)}, ["slow", "fast"]) == "fast"


class _ScriptedLaunches:
    """The runoff's view of ``ListEvaluator`` (``launchers``, ``measured``, ``phases``) with scripted
    launches: each config's launch takes its given cost (``_takes``) (the runoff times it on the wall clock
    without a GPU)."""

    def __init__(self, costs: dict[int, float]) -> None:
        self.costs, self.measured = costs, 0
        self.phases: collections.defaultdict[str, float] = collections.defaultdict(float)

    def launchers(self, configs):
        return [_takes(self.costs[c["a"]]) for c in configs]


def test_runoff_screen_brings_back_a_config_its_screening_window_misread() -> None:
    """A screening time can read far slow (the clock its predecessor left): config 2 screened 1.45x
    the fastest, and only its two launches were kept (cut), but it is the fastest launch.  The screen
    round (every config within 1.5x, interleaved) brings it into the runoff, which it wins; config 4,
    screened beyond 1.5x, is not re-timed and cannot win however fast it launches."""
    from kerntune.retune_runoff import runoff

    hist = [Trial({"a": 1}, Status.OK, 1.0, [1.0]), Trial({"a": 2}, Status.OK, 1.45, [1.45], extra={"cut": True}),
            Trial({"a": 3}, Status.OK, 1.1, [1.1]), Trial({"a": 4}, Status.OK, 1.6, [1.6])]
    ev = _ScriptedLaunches({1: 1.0, 2: 0.4, 3: 1.1, 4: 0.1})
    got = runoff(ev, hist, "auto")
    assert got is not None and got["config"] == {"a": 2}
    assert sorted(got["screen"]) == ['{"a": 1}', '{"a": 2}', '{"a": 3}']
    assert 0.25 < got["ms"] < 0.9 and ev.measured >= 3


def test_runoff_leaves_what_interleaving_cannot_separate_to_windows_scripted_timings(monkeypatch) -> None:
    """Scripted timings: configs 1 and 2 trade places cycle by cycle (5% either way), so interleaved
    launches never settle them, even after the last round; windows of each alone then decide, and
    they put 2 ahead.  Config 3, twice as slow, leaves at the screen."""
    import kerntune.evaluate.runoff as ev_runoff
    import kerntune.retune_runoff as ro

    pattern = {1: [1.0, 1.05], 2: [1.05, 1.0], 3: [2.0, 2.0]}
    monkeypatch.setattr(ev_runoff, "interleaved", lambda calls, cycles, warm_cycles=1:
                        [[pattern[fn.a][c % 2] for c in range(cycles)] for fn in calls])
    monkeypatch.setattr(ev_runoff, "windows", lambda calls, rounds:
                        {k: [1.0 if k == '{"a": 2}' else 1.04] * rounds for k in calls})

    class Named(_ScriptedLaunches):
        def launchers(self, configs):
            fns = super().launchers(configs)
            for fn, c in zip(fns, configs):
                fn.a = c["a"]
            return fns

    hist = [Trial({"a": a}, Status.OK, 1.0, [1.0]) for a in (1, 2, 3)]
    got = ro.runoff(Named({1: 1.0, 2: 1.0, 3: 2.0}), hist, "auto")
    assert got is not None and got["config"] == {"a": 2}
    assert sorted(got["tie_windows"]) == ['{"a": 1}', '{"a": 2}']
    assert got["rounds"].keys() == {'{"a": 1}', '{"a": 2}'}
    assert len(got["rounds"]['{"a": 1}']) == ev_runoff.AUTO_ROUNDS[1]  # unsettled: every round ran


def test_runoff_windows_time_each_call_alone_in_rotated_rounds() -> None:
    """The tie-break's windows (wall clock without a GPU): one window per call a round, the calls'
    costs kept apart, and the leader of those windows is the cheaper call."""
    from kerntune.evaluate.runoff import leader, windows

    got = windows({"slow": _takes(2.0), "fast": _takes(1.0)}, rounds=2)
    assert len(got["slow"]) == len(got["fast"]) == 2
    # window medians: robust to a descheduled call
    assert all(1.3 < s / f < 3.0 for s, f in zip(got["slow"], got["fast"]))
    assert leader(got, ["slow", "fast"]) == "fast"
