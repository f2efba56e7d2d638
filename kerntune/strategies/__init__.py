"""Search strategies: each a module with one ``search(ctx, **options)`` function."""

from __future__ import annotations

from kerntune.errors import KerntuneError
from kerntune.strategies import bayes, exhaustive, genetic, gp, pattern, random_search
from kerntune.strategies import llm_seeded
from kerntune.strategies.base import Budget, BudgetExhausted, SearchContext, SearchStalled, Strategy
from kerntune.strategies.llm import rounds as llm_rounds

STRATEGIES: dict[str, Strategy] = {
    "exhaustive": exhaustive.search,
    "random": random_search.search,
    "pattern": pattern.search,
    "bayes": bayes.search,
    "genetic": genetic.search,
    "gp": gp.search,
    "llm": llm_rounds.search,
    "llm-seeded": llm_seeded.search,
}
#: Strategies that need a model (``--llm``).
LLM_STRATEGIES = {"llm", "llm-seeded"}
ALIASES = {"brute_force": "exhaustive", "local": "pattern", "tpe": "bayes", "ga": "genetic"}


def get_strategy(name: str) -> Strategy:
    key = ALIASES.get(name, name)
    if key not in STRATEGIES:
        raise KerntuneError(f"unknown strategy {name!r} (known: {', '.join(STRATEGIES)})")
    return STRATEGIES[key]


__all__ = ["ALIASES", "LLM_STRATEGIES", "STRATEGIES", "Budget", "BudgetExhausted", "SearchContext", "SearchStalled", "Strategy",
           "get_strategy"]
