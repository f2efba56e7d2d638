"""Every classical strategy under the shared SearchContext rules, on the real
recorded convolution space."""

from __future__ import annotations

import pytest

from kerntune.errors import KerntuneError
from kerntune.run.search import run_search
from kerntune.strategies import LLM_STRATEGIES, STRATEGIES, Budget, BudgetExhausted, get_strategy

NAMES = sorted(set(STRATEGIES) - LLM_STRATEGIES)


@pytest.mark.parametrize("name", NAMES)
def test_strategy_respects_budget_and_never_measures_twice(name: str, conv_evaluator) -> None:
    res = run_search(conv_evaluator, name, Budget(max_evals=60), seed=7)
    assert len(res.history) == 60
    keys = [conv_evaluator.space.key(t.config) for t in res.history]
    assert len(set(keys)) == len(keys)
    assert all(conv_evaluator.space.is_valid(t.config) for t in res.history)
    assert res.best is not None and res.best.ok
    assert res.best.time_ms == min(t.time_ms for t in res.history if t.ok)


@pytest.mark.parametrize("name", NAMES)
def test_strategy_is_deterministic_under_a_seed(name: str, conv_evaluator) -> None:
    a = run_search(conv_evaluator, name, Budget(max_evals=40), seed=3)
    b = run_search(conv_evaluator, name, Budget(max_evals=40), seed=3)
    assert [t.config for t in a.history] == [t.config for t in b.history]


def test_different_seeds_explore_differently(conv_evaluator) -> None:
    a = run_search(conv_evaluator, "random", Budget(max_evals=20), seed=1)
    b = run_search(conv_evaluator, "random", Budget(max_evals=20), seed=2)
    assert [t.config for t in a.history] != [t.config for t in b.history]


def test_time_budget_uses_the_recorded_clock(conv_evaluator) -> None:
    res = run_search(conv_evaluator, "random", Budget(max_seconds=30.0), seed=0)
    assert res.stop_reason == "time budget"
    # The clock is the sum of recorded compile + benchmark costs; the last batch may overshoot.
    total = sum(t.cost_s for t in res.history)
    assert res.clocks[-1] == pytest.approx(total)
    assert total >= 30.0
    assert sum(t.cost_s for t in res.history[:-8]) < 30.0


def test_target_stops_the_search(conv_evaluator) -> None:
    target = conv_evaluator.recording.summary()["median_ms"]
    res = run_search(conv_evaluator, "genetic", Budget(max_evals=500, target_ms=target), seed=0)
    assert res.stop_reason == "target reached"
    assert res.best.time_ms <= target
    assert len(res.history) < 500


def test_exhaustive_finds_the_recorded_optimum(conv_evaluator) -> None:
    n = conv_evaluator.space.count()
    res = run_search(conv_evaluator, "exhaustive", Budget(max_evals=n + 10), seed=0)
    assert len(res.history) == n
    assert res.best.time_ms == conv_evaluator.recording.summary()["optimum_ms"]


def test_search_beats_random_on_average(conv_evaluator) -> None:
    """A sanity check, not a benchmark: the genetic algorithm's mean best after
    150 evaluations over 5 seeds is better than random search's."""
    def mean_best(name: str) -> float:
        return sum(run_search(conv_evaluator, name, Budget(max_evals=150), seed=s).best.time_ms
                   for s in range(5)) / 5

    assert mean_best("genetic") < mean_best("random")


def test_bad_budgets_and_names_are_user_errors() -> None:
    with pytest.raises(KerntuneError, match="budget must be 1 to"):
        Budget(max_evals=0)
    with pytest.raises(KerntuneError, match="positive"):
        Budget(max_seconds=-1)
    with pytest.raises(KerntuneError, match="unknown strategy 'nope'"):
        get_strategy("nope")


@pytest.mark.parametrize("name", ["bayes", "tpe", "gp", "pattern", "genetic"])
def test_strategy_starts_from_trials_measured_before_it(name: str, conv_evaluator) -> None:
    """llm-seeded runs a classical strategy after the LLM rounds: it must build on
    them (no fresh random start when enough was measured) and never re-measure them."""
    from kerntune.strategies.base import SearchContext

    sources: list[str] = []
    ctx = SearchContext(conv_evaluator.space, conv_evaluator, Budget(max_evals=45), seed=5,
                        on_trial=lambda _i, _k, _t, _c, src: sources.append(src))
    earlier = ctx.space.sample(ctx.rng, 25)
    ctx.evaluate(earlier, source="earlier")
    before = {ctx.space.key(c) for c in earlier}
    best_before = ctx.best
    with pytest.raises(BudgetExhausted):
        get_strategy(name)(ctx)
    later = sources[25:]
    assert len(later) == 20
    assert not [s for s in later if s.endswith((":startup", ":sample", ":init"))], later
    keys = [ctx.space.key(t.config) for t in ctx.history[25:]]
    assert not before & set(keys)
    if name == "pattern":  # the climb starts at the best earlier config: its first batch are its neighbours
        near = {ctx.space.key(c) for c in ctx.space.neighbours(best_before.config, "hamming")}
        assert keys[0] in near or keys[0] == ctx.space.key(best_before.config)


def test_gp_beats_random_on_the_recorded_convolution_space(conv_evaluator) -> None:
    """Seeded, so deterministic: over 6 repeats at 120 evaluations the GP's best is
    closer to the optimum than random sampling's in every repeat, and it finds the
    optimum at least twice (quality figures live in benchmarks/)."""
    def bests(name: str) -> list[float]:
        return [run_search(conv_evaluator, name, Budget(max_evals=120), seed=s).best.time_ms for s in range(6)]

    gp, rnd = bests("bayes"), bests("random")
    assert all(g < r for g, r in zip(gp, rnd)), (gp, rnd)
    optimum = conv_evaluator.recording.summary()["optimum_ms"]
    assert sum(g <= optimum * 1.0001 for g in gp) >= 2, gp


class _WallClockReplay:
    """The recorded convolution space measured on the wall clock: each config sleeps 50 ms, as a
    real evaluator would spend compiling and timing it."""

    def __init__(self, inner) -> None:
        self.inner, self.space, self.simulated_clock, self.parallelism = inner, inner.space, False, 1

    def stream(self, configs):
        import time
        for j, trial in enumerate(self.inner.evaluate(configs)):
            time.sleep(0.05)
            yield j, trial


def test_a_wall_clock_budget_cuts_the_last_batch_instead_of_overshooting(conv_evaluator) -> None:
    from kerntune.evaluate.trial import Status
    from kerntune.strategies.base import SearchContext

    ev = _WallClockReplay(conv_evaluator)
    ctx = SearchContext(ev.space, ev, Budget(max_seconds=0.4), seed=0)  # type: ignore[arg-type]
    configs = ev.space.sample(ctx.rng, 42)
    ctx.evaluate(configs[:2])  # ~0.1 s: about 0.05 s per config so far
    out = ctx.evaluate(configs[2:])  # 40 more would take ~2 s; about 6 fit in what is left
    measured = [t for t in out if t.status is not Status.UNMEASURED]
    assert 1 <= len(measured) <= 8
    assert ctx.clock_s < 0.4 + 0.3
    # a recording's clock is the recorded cost: its batches are not cut by this rule
    rec = SearchContext(conv_evaluator.space, conv_evaluator, Budget(max_seconds=1e9), seed=0)
    rec.evaluate(configs[:2])
    assert all(t.status is not Status.UNMEASURED for t in rec.evaluate(configs[2:]))


def test_time_spent_outside_measuring_does_not_shrink_the_next_batch(conv_evaluator) -> None:
    """An LLM call between batches takes wall time but measures nothing: the per-config estimate
    must come from measuring alone, or a slow first model call would cut its batch to one."""
    import time

    from kerntune.evaluate.trial import Status
    from kerntune.strategies.base import SearchContext

    ev = _WallClockReplay(conv_evaluator)
    ctx = SearchContext(ev.space, ev, Budget(max_seconds=2.0), seed=0)  # type: ignore[arg-type]
    configs = ev.space.sample(ctx.rng, 12)
    ctx.evaluate(configs[:2])  # ~0.1 s of measuring
    time.sleep(0.4)  # the model thinks
    ctx.charge(0.4)
    out = ctx.evaluate(configs[2:])  # 10 x 0.05 s fit easily in the ~1.5 s left
    assert all(t.status is not Status.UNMEASURED for t in out)


def test_the_gp_factorises_with_one_blas_thread(conv_evaluator, monkeypatch) -> None:
    """``bayes``/``gp`` refitted with as many BLAS threads as cores: on a busy 2-core machine each small
    solve took about 9 ms, most of a 120-evaluation run (``auto``'s surrogate already held one thread).
    Where BLAS would start one thread anyway (one core) this cannot fail."""
    import threadpoolctl

    from kerntune.strategies import gp_model

    threads: list[list[int]] = []
    refit = gp_model._GP.refit

    def spy(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        threads.append([i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"])
        return refit(self, *args, **kwargs)

    monkeypatch.setattr(gp_model._GP, "refit", spy)
    run_search(conv_evaluator, "gp", Budget(max_evals=20), seed=0)
    assert threads and all(n and set(n) == {1} for n in threads), threads
