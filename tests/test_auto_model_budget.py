"""``auto`` with a model under its budget (``auto_model``): a time budget that ends while the model
thinks ends the search without waiting for the answer, and ``overlap_first`` under the start's size
cuts the start (the start counts against it)."""

from __future__ import annotations

import time

import pytest

from kerntune.llm import LLMClient
from kerntune.run.search import RunOptions, run_search
from kerntune.strategies import Budget, BudgetExhausted, get_strategy
from kerntune.strategies.base import SearchContext
from scripted import ScriptedProvider, answer, synthetic_evaluator, wall_clock_evaluator

BEST = {"BM": 64, "W": 4, "bs": [32, 32]}


def _client(script) -> LLMClient:
    return LLMClient(ScriptedProvider(script), retries=0, backoff_base=0.0)


def test_a_time_budget_that_ends_while_the_model_thinks_does_not_wait_for_it(tmp_path) -> None:
    def slow(n, messages):
        time.sleep(3.0)
        return answer(BEST)

    ev = wall_clock_evaluator(tmp_path)
    t0 = time.perf_counter()
    res = run_search(ev, "auto", Budget(max_seconds=0.5), seed=0, run=RunOptions(llm=_client(slow)))
    wall = time.perf_counter() - t0
    assert wall < 2.0, wall  # it waited for the 3 s answer before
    assert res.stop_reason == "time budget"
    assert res.history and res.clocks[-1] < 1.5
    assert any("its answer is not used" in n for n in res.notes), res.notes


def _sources_before_the_model(tmp_path, budget: Budget, **options) -> list[str]:
    ev = synthetic_evaluator(tmp_path)
    sources: list[str] = []
    ctx = SearchContext(ev.space, ev, budget, seed=0, llm=_client(lambda n, m: answer(BEST, {"BM": 32})),
                        on_trial=lambda _i, _k, _t, _c, src: sources.append(src))
    with pytest.raises(BudgetExhausted):
        get_strategy("auto")(ctx, initial=2, **options)
    return sources[: sources.index("auto:model1")]


@pytest.mark.parametrize("overlap_first, expected", [(0, 0), (2, 2), (10, 5)])
def test_overlap_first_under_the_start_cuts_the_start(tmp_path, overlap_first: int, expected: int) -> None:
    before = _sources_before_the_model(tmp_path, Budget(max_evals=30), overlap_first=overlap_first)
    assert before == ["auto:startup"] * expected


def test_the_start_is_whole_under_a_budget_of_time_alone(tmp_path) -> None:
    before = _sources_before_the_model(tmp_path, Budget(max_seconds=12.0), overlap_first=2)
    assert before[:5] == ["auto:startup"] * 5
