"""Search strategies: each a module with one ``search(ctx, **options)`` function.

The registry names modules rather than importing them, so a strategy's heavy
dependencies (Optuna for ``tpe``) load only when that strategy is used —
GPU worker processes and the replay of other strategies never pay for them.
"""

from __future__ import annotations

import importlib

from kerntune.errors import KerntuneError
from kerntune.strategies.base import Budget, BudgetExhausted, SearchContext, SearchStalled, Strategy

#: name -> module holding its ``search`` function
STRATEGIES: dict[str, str] = {
    "exhaustive": "kerntune.strategies.exhaustive",
    "random": "kerntune.strategies.random_search",
    "pattern": "kerntune.strategies.pattern",
    "bayes": "kerntune.strategies.bayes",
    "genetic": "kerntune.strategies.genetic",
    "gp": "kerntune.strategies.gp",
    "tpe": "kerntune.strategies.tpe",
    "llm": "kerntune.strategies.llm.rounds",
    "llm-seeded": "kerntune.strategies.llm_seeded",
    "auto": "kerntune.strategies.auto",
}
#: Strategies that need a model (``--llm``).
LLM_STRATEGIES = {"llm", "llm-seeded"}
#: Strategies that use a model when one is given and search classically without one.
MODEL_OPTIONAL = {"auto"}
#: What ``tune``, ``compare`` and the decorator run when no strategy is named.
DEFAULT_STRATEGY = "auto"
ALIASES = {"brute_force": "exhaustive", "local": "pattern", "ga": "genetic"}


def get_strategy(name: str) -> Strategy:
    key = ALIASES.get(name, name)
    if key not in STRATEGIES:
        raise KerntuneError(f"unknown strategy {name!r} (known: {', '.join(STRATEGIES)})")
    return importlib.import_module(STRATEGIES[key]).search  # type: ignore[no-any-return]


__all__ = ["ALIASES", "DEFAULT_STRATEGY", "LLM_STRATEGIES", "MODEL_OPTIONAL", "STRATEGIES", "Budget", "BudgetExhausted", "SearchContext", "SearchStalled",
           "Strategy", "get_strategy"]
