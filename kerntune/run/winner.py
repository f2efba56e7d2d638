"""The winner a re-time settled, kept with its run.

``tune``, each ``tune --shapes`` child, ``kerntune exec``'s searches and ``kerntune.tune`` confirm the
search's leaders (runoff, then re-timing) and may pick another config than the screening's fastest.
The run kept only its screening times, so the report named as best a config the runoff had rejected
while ``tune`` printed and cached another: the winner now goes into the run's summary (``WINNER``)
and the report names it first.
"""

from __future__ import annotations

from typing import Any

from kerntune.store import Store

#: The key of a run's summary that holds the winner a re-time (runoff, then re-timing) settled
#: (``winner_entry``): ``tune``, each ``--shapes`` child and ``kerntune exec``'s searches keep it, and
#: the report names it first.  Why: the run kept only its screening times, so the report named as best
#: a config the runoff had rejected, while ``tune`` printed and cached another.
WINNER = "winner"


def baseline_name(shipped: Any) -> str:
    """What a re-time's baseline is, as the speedup line and the stored winner name it: a package
    kernel's own choice (``shipped``: the config its code launches) or the space's default config."""
    return "the package's own choice" if shipped else "the default config"


def winner_entry(config: dict[str, Any], time_ms: float, **facts: Any) -> dict[str, Any]:
    """A re-timed winner as a run's summary keeps it (``WINNER``): its config, its re-timed time and what
    else the re-time said (``facts``: its interval, rounds, speedup over the baseline)."""
    from kerntune.space import jsonable

    return {"config": {k: jsonable(v) for k, v in config.items()}, "time_ms": float(time_ms), "retimed": True,
            **facts}


def confirmed_winner(found: Any, over: str = "the default config") -> dict[str, Any] | None:
    """The ``winner_entry`` of what ``kerntune.evaluate.retime.confirm`` found (None: no re-timed winner).
    ``over``: what the baseline is, as the speedup line names it.  The speedup is kept only where the
    search's pick stood (else it measures the pick, not the winner: the baseline)."""
    w = found.winner
    if w is None or not w.ok or w.time_ms is None:
        return None
    facts: dict[str, Any] = {"rounds": len(w.times_ms or [])}
    if w.extra.get("ci_ms"):
        facts["ci_ms"] = [float(x) for x in w.extra["ci_ms"]]
    if found.baseline is not None and w is found.baseline:
        facts["baseline"] = over
    s = found.speedup
    if s is not None and found.pick is None:
        facts["speedup"] = {"median": s.median, "lo": s.lo, "hi": s.hi, "rounds": s.n, "verdict": found.verdict,
                            "over": over}
    return winner_entry(w.config, w.time_ms, **facts)


def record_winner(store: Store, run_id: str | None, entry: dict[str, Any] | None) -> None:
    """Keep ``entry`` (``winner_entry``) in the finished run's summary under ``WINNER``."""
    if run_id is None or entry is None:
        return
    run = store.get_run(run_id)
    store.finish_run(run_id, run.status, summary={**(run.summary or {}), WINNER: entry})
