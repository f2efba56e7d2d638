"""A time budget (``--seconds``) is not overrun by a whole batch (``SearchContext._stream`` and
``_fits_in_time``): on a recording no config starts once the simulated clock has reached the
budget; on a real clock the first batch, with no per-config estimate yet, starts at most one
parallel round, then the rest of that batch once the cost is known; and exhaustive measures every config."""

from __future__ import annotations

import time

import pytest

from kerntune.evaluate.trial import Status
from kerntune.run.search import run_search
from kerntune.strategies import Budget
from kerntune.strategies.base import SearchContext


@pytest.mark.parametrize("name", ["random", "genetic", "exhaustive"])
def test_a_recording_starts_no_config_once_the_clock_reached_the_budget(name: str, conv_evaluator) -> None:
    res = run_search(conv_evaluator, name, Budget(max_seconds=20.0), seed=0)
    assert res.stop_reason == "time budget"
    # every trial but the last started before the clock reached 20 s; the last one crossed it
    assert res.clocks[-2] < 20.0 <= res.clocks[-1], res.clocks[-10:]
    assert res.clocks[-1] == pytest.approx(sum(t.cost_s for t in res.history))


def test_the_configs_a_recording_did_not_start_are_unmeasured_and_not_charged(conv_evaluator) -> None:
    ctx = SearchContext(conv_evaluator.space, conv_evaluator, Budget(max_seconds=5.0), seed=0)
    configs = conv_evaluator.space.sample(ctx.rng, 40)
    out = ctx.evaluate(configs)
    started = [t for t in out if not (t.status is Status.UNMEASURED and t.error == "over budget")]
    assert 1 <= len(started) < 40
    assert out[len(started):] and all(t.error == "over budget" for t in out[len(started):])  # a prefix started
    assert len(ctx.history) == len(started)
    assert ctx.clock_s == pytest.approx(sum(t.cost_s for t in started))
    assert sum(t.cost_s for t in started[:-1]) < 5.0 <= ctx.clock_s
    assert not any(ctx.is_measured(c) for c in configs[len(started):])


class _Wall:
    """The recorded convolution space on the wall clock (``sleep_s`` per config), ``parallelism`` workers."""

    def __init__(self, inner, parallelism: int, sleep_s: float = 0.01) -> None:
        self.inner, self.space, self.simulated_clock = inner, inner.space, False
        self.parallelism, self.sleep_s = parallelism, sleep_s
        self.calls: list[int] = []  # the size of each batch streamed

    def __getattr__(self, name):  # workload, device, describe ...: the recording's
        return getattr(self.inner, name)

    def stream(self, configs):
        self.calls.append(len(configs))
        for j, trial in enumerate(self.inner.evaluate(configs)):
            time.sleep(self.sleep_s)
            yield j, trial


def test_a_wall_clock_budget_starts_one_parallel_round_before_it_knows_the_cost(conv_evaluator) -> None:
    ev = _Wall(conv_evaluator, parallelism=3)
    ctx = SearchContext(ev.space, ev, Budget(max_seconds=30.0), seed=0)  # type: ignore[arg-type]
    configs = ev.space.sample(ctx.rng, 12)
    out = ctx.evaluate(configs)
    # one parallel round first, then, the cost known, the rest of the batch in the same call (the first
    # form of this cut returned the 9 as "over budget", and a model's first round lost them)
    assert ev.calls == [3, 9] and all(t.status is not Status.UNMEASURED for t in out)
    # without a time budget nothing is cut
    ctx = SearchContext(ev.space, ev, Budget(max_evals=100), seed=0)  # type: ignore[arg-type]
    assert all(t.status is not Status.UNMEASURED for t in ctx.evaluate(configs))


def test_exhaustive_measures_the_configs_of_a_batch_a_wall_clock_budget_cut(tmp_path) -> None:
    from scripted import synthetic_evaluator

    rec = synthetic_evaluator(tmp_path)
    ev = _Wall(rec, parallelism=1, sleep_s=0.001)
    n = rec.space.count()
    res = run_search(ev, "exhaustive", Budget(max_seconds=60.0), seed=0)  # type: ignore[arg-type]
    assert res.stop_reason == "space exhausted"
    assert len(res.history) == n
    assert len({rec.space.key(t.config) for t in res.history}) == n


def test_a_model_first_round_is_measured_whole_under_a_wall_clock_budget(tmp_path) -> None:
    """``llm`` with ``warmup=0`` under ``--seconds``: the model's first batch is the first thing measured,
    and it used to be cut to one parallel round (3 of 25 configs measured)."""
    import json

    from scripted import ScriptedProvider, synthetic_evaluator

    from kerntune.llm.client import LLMClient
    from kerntune.run.search import RunOptions

    rec = synthetic_evaluator(tmp_path)
    ev = _Wall(rec, parallelism=3, sleep_s=0.001)
    picks = rec.space.sample(__import__("random").Random(0), 25)
    answer = json.dumps({"configs": [{"reasoning": "r", "config": c} for c in picks]})
    client = LLMClient(ScriptedProvider(lambda n, m: answer))
    res = run_search(ev, "llm", Budget(max_seconds=600.0), seed=0,  # type: ignore[arg-type]
                     run=RunOptions(llm=client, strategy_options={"warmup": 0, "max_rounds": 1}))
    assert len(res.history) == 25, [t.status for t in res.history]


def test_a_pessimistic_first_estimate_does_not_cut_the_rest_of_a_batch(tmp_path) -> None:
    """The first round (worker start-up, cold compiles) is slow, the rest fast: the estimate made from it
    is pessimistic.  The batch goes on while time is left; it was cut after its second part, and
    exhaustive then skipped 32 of 108 configs and still said "space exhausted"."""
    from scripted import synthetic_evaluator

    rec = synthetic_evaluator(tmp_path)

    class SlowStart(_Wall):
        def stream(self, configs):
            for j, trial in enumerate(self.inner.evaluate(configs)):
                time.sleep(0.25 if len(self.calls) == 0 else 0.002)
                yield j, trial
            self.calls.append(len(configs))

    ev = SlowStart(rec, parallelism=4)
    # 1 s for the first 4 configs, then about 2 ms each: 3 s hold all 108, the first estimate (0.25 s) only 8
    res = run_search(ev, "exhaustive", Budget(max_seconds=3.0), seed=0)  # type: ignore[arg-type]
    assert res.stop_reason == "space exhausted"
    assert len({rec.space.key(t.config) for t in res.history if t.status is not Status.UNMEASURED}) == rec.space.count()
