"""``llm-seeded``: a few LLM rounds, then a classical strategy that starts
from everything the model's configs taught it, under one shared budget.

The model is good at the first guess (where to look); a classical search is
good at the last few percent (exactly which neighbour wins).  The classical
strategy sees the LLM rounds through ``ctx.history``: Bayesian search tells
its model every measured trial first, the genetic algorithm seeds its
population with the best of them, pattern search climbs from the best.

Under a time budget the LLM phase waits for the model only while time is left
(``llm.rounds.wait_within_budget``): a call still out when the time is spent is
abandoned and BudgetExhausted ends the run with the stop reason ``llm.rounds.MODEL_OUT_OF_TIME``
(the time is spent then, so there is none to hand to the classical phase); an answer
that comes back in time leaves what is left of the budget to the classical phase.
"""

from __future__ import annotations

from typing import Any, Mapping

from kerntune.errors import KerntuneError
from kerntune.strategies.base import SearchContext

#: What ``fallback`` does here without ``top_up`` (false unless given): nothing but 'error' (the run stops).
NO_FALLBACK = ("has no effect without -o top_up=true: a failed model call ends the LLM phase and the"
               " classical search goes on")


def fallback_refused(options: Mapping[str, Any]) -> str | None:
    """The one line that refuses a ``fallback`` given (random or pattern) where ``top_up`` is not true,
    else None.  Without top_up a failed model call ends the LLM phase (``llm.rounds._rounds``) and no
    fallback proposes: the option was accepted, listed as "who proposes when the model fails", and did
    nothing.  'error' still acts (the run stops on the failure), and so does any fallback with top_up."""
    given = options.get("fallback")
    if given is None or given == "error" or options.get("top_up"):
        return None
    return f"fallback={given} {NO_FALLBACK}"


def search(ctx: SearchContext, rounds: int = 1, then: str = "bayes", then_options: dict[str, Any] | None = None,
           **llm_options: Any) -> None:
    from kerntune.strategies import get_strategy
    from kerntune.strategies.llm.rounds import search as llm_search

    why = fallback_refused(llm_options)  # said before a run is stored too (``options.LLMSeededOptions``)
    if why:
        raise KerntuneError(f"llm-seeded: {why}")
    # An option given as null (``-o patience=null``) means its documented default here, as one left
    # out: a None passed on crashed the rounds after the first was measured.
    if llm_options.get("patience") is None:
        llm_options["patience"] = rounds + 1  # the classical phase decides when to stop
    # Only the model's own valid configs are measured (no fallback top-up): they are what the
    # classical phase should learn from, and a weak model then costs few evaluations.
    if llm_options.get("top_up") is None:
        llm_options["top_up"] = False
    # The llm option target_ms is folded into the budget's target by the rounds: the stream stops on the
    # trial that meets it, and the classical phase stops on it too (it once went on measuring).
    llm_search(ctx, max_rounds=rounds, tell_unspent=False, **llm_options)
    if ctx.stop_reason == "target reached":  # the search is over
        return
    ctx.stop_reason = ""
    get_strategy(then)(ctx, **(then_options or {}))
