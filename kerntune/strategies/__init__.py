"""Search strategies: each a module with one ``search(ctx, **options)`` function."""

from __future__ import annotations

from kerntune.errors import KerntuneError
from kerntune.strategies import bayes, exhaustive, genetic, gp, pattern, random_search
from kerntune.strategies.base import Budget, BudgetExhausted, SearchContext, SearchStalled, Strategy

STRATEGIES: dict[str, Strategy] = {
    "exhaustive": exhaustive.search,
    "random": random_search.search,
    "pattern": pattern.search,
    "bayes": bayes.search,
    "genetic": genetic.search,
    "gp": gp.search,
}
ALIASES = {"brute_force": "exhaustive", "local": "pattern", "tpe": "bayes", "ga": "genetic"}


def get_strategy(name: str) -> Strategy:
    key = ALIASES.get(name, name)
    if key not in STRATEGIES:
        raise KerntuneError(f"unknown strategy {name!r} (known: {', '.join(STRATEGIES)})")
    return STRATEGIES[key]


__all__ = ["ALIASES", "STRATEGIES", "Budget", "BudgetExhausted", "SearchContext", "SearchStalled", "Strategy",
           "get_strategy"]
