"""The GP of ``gp`` / ``bayes`` and of ``auto``'s engine has room for the trials measured before it
(llm-seeded's LLM rounds, warm starts: told first) and for its own measurements: sized by the
remaining budget alone, the earlier trials filled it and the strategy learnt nothing from its own."""

from __future__ import annotations

import pytest

import kerntune.strategies.gp as gp_module
import kerntune.strategies.surrogate as surrogate_module
from kerntune.strategies import Budget, BudgetExhausted, get_strategy
from kerntune.strategies.base import SearchContext


def _after_earlier_trials(conv_evaluator, earlier: int, budget: int) -> SearchContext:
    ctx = SearchContext(conv_evaluator.space, conv_evaluator, Budget(max_evals=budget), seed=3)
    ctx.evaluate(ctx.space.sample(ctx.rng, earlier), source="earlier")
    return ctx


@pytest.mark.parametrize("name, module", [("gp", gp_module), ("auto", surrogate_module)])
def test_the_gp_learns_from_its_own_measurements_after_earlier_trials(name, module, conv_evaluator,
                                                                       monkeypatch) -> None:
    made: list = []

    class Recorded(module._GP):  # type: ignore[name-defined,misc]
        def __init__(self, *a, **k) -> None:
            super().__init__(*a, **k)
            made.append(self)

    monkeypatch.setattr(module, "_GP", Recorded)
    ctx = _after_earlier_trials(conv_evaluator, earlier=25, budget=40)
    with pytest.raises(BudgetExhausted):
        get_strategy(name)(ctx)
    model = made[0]
    assert len(ctx.history) == 40
    assert model.cap == 40
    assert model.n == sum(t.ok for t in ctx.history)  # every successful trial, its own 15 included


def test_the_capacity_is_the_earlier_trials_plus_the_remaining_budget(conv_evaluator) -> None:
    ctx = _after_earlier_trials(conv_evaluator, earlier=10, budget=30)
    assert surrogate_module.SurrogateSearch(ctx).cap == 30
    ctx = SearchContext(conv_evaluator.space, conv_evaluator, Budget(max_evals=30), seed=3)
    assert surrogate_module.SurrogateSearch(ctx).cap == 30           # nothing earlier: as before
    ctx = SearchContext(conv_evaluator.space, conv_evaluator, Budget(max_seconds=10.0), seed=3)
    assert surrogate_module.SurrogateSearch(ctx).cap == gp_module._MAX_OBS  # no evaluation budget
