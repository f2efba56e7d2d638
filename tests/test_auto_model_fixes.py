"""``auto`` with a model (``kerntune.strategies.auto_model``): the answer is waited for within the time
budget once the surrogate has stopped measuring, and the model is asked only for configs the budget can
measure once the surrogate's measurements beside the call are made.

The models are scripted (in-process; the slow ones really sleep ~2 s, on a daemon thread the run does
not wait for); the spaces are the synthetic recording on its simulated clock or in wall time (20 ms a
config, ``wall_clock_evaluator``)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from kerntune.evaluate import ReplayEvaluator, Status, Trial, table_dict
from kerntune.llm import LLMClient
from kerntune.run.search import RunOptions, run_search
from kerntune.space import Choice, Space
from kerntune.strategies import Budget, BudgetExhausted, get_strategy
from kerntune.strategies.base import SearchContext
from kerntune.strategies.llm.rounds import MODEL_OUT_OF_TIME
from scripted import ScriptedProvider, answer, synthetic_evaluator, wall_clock_evaluator

BEST = {"BM": 64, "W": 4, "bs": [32, 32]}
SLEEP_S = 2.0  # the slow model's sleep, twice the time budgets below


def _slow(n, messages) -> str:  # noqa: ANN001
    time.sleep(SLEEP_S)
    return answer(BEST)


def _client(provider: ScriptedProvider) -> LLMClient:
    return LLMClient(provider, retries=0, backoff_base=0.0)


def _run_ctx(ev, budget: Budget, provider: ScriptedProvider, **options) -> tuple[SearchContext, list[str]]:  # noqa: ANN001
    """auto on ``ev`` to the budget's end; the context and each trial's source, in order."""
    sources: list[str] = []
    ctx = SearchContext(ev.space, ev, budget, seed=0, llm=_client(provider),
                        on_trial=lambda _i, _k, _t, _c, src: sources.append(src))
    try:
        get_strategy("auto")(ctx, **options)
    except BudgetExhausted:
        pass
    return ctx, sources


# -- 1: the answer is not waited for past the time budget -------------------------------------------

def test_scripted_auto_with_evals_and_seconds_stops_at_the_time_budget_after_the_overlap_cap(tmp_path) -> None:
    """Under an evaluation count and seconds, the surrogate stops at the overlap cap (2 here) with time
    left; the answer was then waited for with no deadline (``fut.result()``: the model's whole sleep,
    up to --llm-timeout), past the budget.  Now the call is given up at the budget's end as ``llm``'s
    is, and the wait after measuring stopped is not counted as hidden."""
    ev = wall_clock_evaluator(tmp_path)
    t0 = time.perf_counter()
    res = run_search(ev, "auto", Budget(max_evals=100, max_seconds=1.0), seed=0,
                     run=RunOptions(llm=_client(ScriptedProvider(_slow)), strategy_options={"overlap_first": 2}))
    wall = time.perf_counter() - t0
    assert wall < SLEEP_S - 0.3, wall
    assert res.stop_reason == MODEL_OUT_OF_TIME
    assert any("time budget was spent while model call 1" in n for n in res.notes), res.notes
    assert len(res.history) == 2 and res.best is not None
    assert not res.llm_exchanges  # the abandoned answer is not stored: a resume asks again
    assert res.extra["model_seconds"] >= 0.9 and res.extra["model_hidden_seconds"] < 0.6, res.extra


def _tiny_wall_clock_evaluator(tmp_path: Path, size: int) -> ReplayEvaluator:
    """A space of ``size`` configs measured in wall time, 20 ms each."""
    space = Space([Choice("W", options=tuple(range(1, size + 1)), description="warps")], default={"W": 1},
                  name="tiny")
    trials = [Trial(c, Status.OK, 1.0 + abs(c["W"] - 3), compile_s=0.01, bench_s=0.01) for c in space.enumerate()]
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(table_dict(space, trials, {"kernel_name": "tiny", "device_name": "NVIDIA H100"})))
    return ReplayEvaluator.from_file(path, realtime=True)


def test_scripted_auto_on_an_exhausted_space_stops_at_the_time_budget(tmp_path) -> None:
    """Six configs, a start of five, a time budget alone: the model is asked for the one left and the
    surrogate measures it meanwhile; the space is then exhausted with time left and the answer was
    waited for past the budget (``surrogate_step`` False, no deadline)."""
    ev = _tiny_wall_clock_evaluator(tmp_path, 6)
    provider = ScriptedProvider(lambda n, m: (time.sleep(SLEEP_S), answer({"W": 6}))[1])
    t0 = time.perf_counter()
    res = run_search(ev, "auto", Budget(max_seconds=1.0), seed=0, run=RunOptions(llm=_client(provider)))
    wall = time.perf_counter() - t0
    assert wall < SLEEP_S - 0.3, wall
    assert res.stop_reason == MODEL_OUT_OF_TIME
    assert len(res.history) == 6


# -- 2: the model is asked only for what the budget can measure -------------------------------------

def _asked(provider: ScriptedProvider) -> list[int]:
    """How many configs each prompt asked for (``$n`` in the prompt templates)."""
    out = []
    for messages in provider.prompts:
        text = messages[-1].content
        marker = "Suggest the first batch of " if "Suggest the first batch of " in text else "Suggest up to "
        out.append(int(text.split(marker, 1)[1].split()[0]))
    return out


def test_scripted_auto_asks_only_for_what_is_left_after_the_overlap(tmp_path) -> None:
    """A budget of 12: the surrogate measures overlap_first (10, the start of 5 included) beside the first
    call, so 2 of the answer can be measured.  The model was asked for 12 and 10 were dropped silently."""
    ev = synthetic_evaluator(tmp_path)
    everything = list(ev.space.enumerate())
    provider = ScriptedProvider(lambda n, m: answer(*everything[::-1][:30]))
    ctx, sources = _run_ctx(ev, Budget(max_evals=12), provider, model_clock_s=30)
    assert _asked(provider) == [2]
    assert sources == ["auto:startup"] * 5 + ["auto:while-model"] * 5 + ["auto:model1"] * 2
    assert not any("asked for measured" in n for n in ctx.notes), ctx.notes  # all it was asked for


def test_scripted_auto_does_not_call_the_model_when_none_of_its_answer_could_be_measured(tmp_path) -> None:
    """A budget of 5: the start spends it all, yet the model was asked for 5 configs (a call paid for
    and waited for) and none was measured.  Now it is not called and the surrogate finishes alone."""
    ev = synthetic_evaluator(tmp_path)
    provider = ScriptedProvider(lambda n, m: answer(BEST))
    ctx, sources = _run_ctx(ev, Budget(max_evals=5), provider, model_clock_s=30)
    assert provider.prompts == []
    assert sources == ["auto:startup"] * 5
    assert any("model is not asked (round 1)" in n and "evaluation budget" in n for n in ctx.notes), ctx.notes
    assert ctx.extra["model_calls"] == 0


def test_scripted_auto_does_not_ask_a_later_round_whose_answer_the_overlap_would_leave_no_room_for(tmp_path) -> None:
    """overlap_later over what is left: the surrogate spends every remaining evaluation beside a later call,
    so its answer could not be measured; it was asked all the same (``max(1, ...)``, warm 0)."""
    ev = synthetic_evaluator(tmp_path)
    provider = ScriptedProvider(lambda n, m: answer(BEST) if n == 1 else answer({"BM": 16, "W": 8, "bs": [64, 64]}))
    ctx, _ = _run_ctx(ev, Budget(max_evals=60), provider, model_clock_s=30, stall=6, refine=3,
                      overlap_later=100)
    assert len(provider.prompts) == 1, ctx.notes
    assert any("model is not asked (round 2)" in n for n in ctx.notes), ctx.notes
    assert ctx.evaluations == 60


def test_scripted_auto_notes_an_answer_that_gives_fewer_configs_than_asked(tmp_path) -> None:
    """Four configs asked for, the answer holds one twice: one is measured, and that was not said."""
    ev = synthetic_evaluator(tmp_path)
    provider = ScriptedProvider(lambda n, m: answer(BEST, BEST))
    ctx, sources = _run_ctx(ev, Budget(max_evals=40), provider, initial=4, max_calls=1)
    assert sources.count("auto:model1") == 1
    assert any("round 1: 1 of the 4 configs asked for measured" in n for n in ctx.notes), ctx.notes
