"""The runoff of ``kerntune.retune``: the close leaders of a ``triton.autotune`` list timed again,
their launches interleaved, until the winner is settled (``kerntune.evaluate.runoff`` holds the
runoff itself and says why it interleaves; this module picks the leaders from the list's history and
launches them in the running program through ``ListEvaluator``)."""

from __future__ import annotations

import time
from typing import Any, Sequence

from kerntune.evaluate.runoff import screened, settle
from kerntune.evaluate.trial import Trial
from kerntune.retune_timing import ListEvaluator, flat_key


def runoff(ev: ListEvaluator, history: Sequence[Trial], setting: int | str) -> dict[str, Any] | None:
    """Time the leaders again, their launches interleaved, and pick the winner by paired ratios of the
    runoff's launches (the screening windows were taken in whatever state the GPU was in while the list
    compiled).

    ``auto``: every config within 50% of the fastest screening time, at most 16 (``SCREEN``; a cut one,
    timed by its two launches only, included), enters ``settle``'s screen round, contenders and
    rounds.  N: the N fastest by screening time (cut ones left out) in 5 rounds.  Returns the winner,
    its median ms (interleaved), per contender its median per round (None where it was out), the screen
    round's medians and the tie-break's windows where they ran; None when off, when fewer than two
    configs qualify, or when a launch fails (the screening's winner then stands)."""
    every = sorted((t for t in history if t.ok and t.time_ms is not None), key=lambda t: t.time_ms)
    auto = setting == "auto"
    if auto:
        leaders = screened(every)
    else:
        n = int(setting)
        timed = [t for t in every if not t.extra.get("cut")]
        leaders = timed[:n] if n > 1 else []
    if len(leaders) < 2:
        return None
    t0 = time.perf_counter()
    config_of = {flat_key(dict(t.config)): t for t in leaders}
    try:
        calls = dict(zip(config_of, ev.launchers([dict(t.config) for t in leaders])))
        got = settle(calls, {k: t.time_ms for k, t in config_of.items()}, auto=auto)
    except Exception:  # noqa: BLE001 - a config that launched before fails now: the screening's winner stands
        return None
    ev.measured += got.timed
    ev.phases["runoff_s"] += time.perf_counter() - t0
    return {"config": dict(config_of[got.winner].config), "ms": got.ms, "rounds": got.rounds,
            "cycles": got.cycles, **({"screen": got.screen} if got.screen else {}),
            **({"tie_windows": got.tie_windows} if got.tie_windows is not None else {})}
