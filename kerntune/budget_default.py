"""The evaluation budget when the caller gives none: one rule for ``kerntune tune``, ``kerntune.tune``
and the decorator.  Its own small module so that the Python API and the decorator can name ``UNSET``
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
