"""The evaluation budget when the caller gives none: one rule for ``kerntune tune``, ``kerntune.tune``
and the decorator; and how a budget reads (the run's line and its report's header).  Its own small module so that the Python API and the decorator can name ``UNSET``
in their signatures without importing the strategies."""

from __future__ import annotations


class Unset:
    """The type of ``UNSET``: an argument left out, told apart from an explicit ``None``."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET = Unset()


def default_evals(budget: int | None | Unset, seconds: float | None, default: int = 100) -> int | None:
    """The evaluation cap.  Left out (``UNSET``): ``default`` (100 for ``tune``, 60 for the
    decorator), or none when a time budget is given, so that ``--seconds 60`` alone runs for 60
    seconds (it stopped at 100 evaluations, long before a replay's or a fast kernel's time was up).
    Given, even as ``None`` (no cap: the Python API's way to say "the whole space"), it stands."""
    if isinstance(budget, Unset):
        return None if seconds is not None else default
    return budget


def describe_budget(max_evals: int | None, max_seconds: float | None, target_ms: float | None) -> str:
    """A budget as the user stated it ("100 evaluations", "60 s", "60 s, until 0.2 ms"), for the
    line ``tune`` prints and the report's header; "" when nothing bounds the run."""
    parts = ([f"{max_evals} evaluations"] if max_evals else []) + \
            ([f"{max_seconds:g} s"] if max_seconds else []) + \
            ([f"until {target_ms:g} ms"] if target_ms else [])
    return ", ".join(parts)
