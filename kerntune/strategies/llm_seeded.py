"""``llm-seeded``: a few LLM rounds, then a classical strategy that starts
from everything the model's configs taught it, under one shared budget.

The model is good at the first guess (where to look); a classical search is
good at the last few percent (exactly which neighbour wins).  The classical
strategy sees the LLM rounds through ``ctx.history``: Bayesian search tells
its model every measured trial first, the genetic algorithm seeds its
population with the best of them, pattern search climbs from the best.
"""

from __future__ import annotations

from typing import Any

from kerntune.strategies.base import SearchContext


def search(ctx: SearchContext, rounds: int = 1, then: str = "bayes", then_options: dict[str, Any] | None = None,
           **llm_options: Any) -> None:
    from kerntune.strategies import get_strategy
    from kerntune.strategies.llm.rounds import search as llm_search

    llm_options.setdefault("patience", rounds + 1)  # the classical phase decides when to stop
    # Only the model's own valid configs are measured (no fallback top-up): they are what the
    # classical phase should learn from, and a weak model then costs few evaluations.
    llm_options.setdefault("top_up", False)
    llm_search(ctx, max_rounds=rounds, tell_unspent=False, **llm_options)
    if ctx.stop_reason == "target reached":  # the llm option target_ms: the search is over
        return
    ctx.stop_reason = ""
    get_strategy(then)(ctx, **(then_options or {}))
