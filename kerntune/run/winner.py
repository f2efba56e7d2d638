"""The winner a re-time settled, kept with its run.

``tune``, each ``tune --shapes`` child, ``kerntune exec``'s searches and ``kerntune.tune`` confirm the
search's leaders (runoff, then re-timing) and may pick another config than the screening's fastest.
The run kept only its screening times, so the report named as best a config the runoff had rejected
while ``tune`` printed and cached another: the winner now goes into the run's summary (``WINNER``)
and the report names it first.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

from kerntune.errors import KerntuneError
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


def config_text(config: Mapping[str, Any]) -> str:
    """A config as one comparable text whatever its key order (its values as ``jsonable`` writes them,
    keys sorted): a stored winner's config against its trials' (the dispatch table, ``store export``)."""
    from kerntune.space import jsonable

    return json.dumps({k: jsonable(v) for k, v in config.items()}, sort_keys=True, default=str)


def compiler_stack(device: Mapping[str, Any]) -> str:
    """The dispatch table's ``versions`` for an evaluator's ``device()``: one text for ``tune``,
    ``kerntune.tune`` and each ``tune --shapes`` shape.  Why: each built it itself, and where the
    evaluator reports no Triton, ``--shapes`` stored "" where ``tune`` stored "torch=None,triton=None",
    two table entries (and two lookups) for one kernel, shape and GPU."""
    return f"torch={device.get('torch')},triton={device.get('triton')}"


def _known_run(store: Store, run_id: str | None) -> bool:
    """Whether the store holds the run that wrote an entry (its origin can be compared with)."""
    if not run_id:
        return False
    try:
        store.get_run(run_id)
    except KerntuneError:
        return False
    return True


def store_winner(store: Store, kernel_hash: str, problem_key: str, device: str, versions: str,
                 config: Mapping[str, Any], time_ms: float, run_id: str | None,
                 history: Iterable[Any]) -> str | None:
    """Write a run's confirmed winner to the dispatch table (``best_configs``); the note to print where
    the table keeps another entry (None: the winner is in the table).

    The rule, for ``tune``, ``kerntune.tune`` and each ``tune --shapes`` shape: the winner replaces the
    stored entry when this run measured the entry's config itself (``history``: its same-process
    comparison decided against it), when the entry is this run's own, or when the entry has no
    comparable origin (no run, or a run this store does not hold).  Otherwise the faster time is kept,
    as before, and said.  Why: the entry was replaced only by a lower time, but times taken in two
    processes under other conditions (a loaded machine) are not comparable, so a wider search's winner
    was printed as the dispatch table while the table kept a narrower run's pick."""
    hit = store.best_entry(kernel_hash, problem_key, device, versions)
    mine = config_text(config)
    replace = (hit is None or (run_id is not None and hit["run_id"] == run_id) or not _known_run(store, hit["run_id"])
               or config_text(hit["config"]) in {config_text(t.config) for t in history})
    store.put_best(kernel_hash, problem_key, device, versions, config, time_ms, run_id, replace=replace)
    now = store.best_entry(kernel_hash, problem_key, device, versions)  # read back: another process may have written
    # the config is what `cache export` and the decorator launch: the same config kept from another run
    # (its time the older run's) is this run's winner in the table, not "another entry"
    if now is None or config_text(now["config"]) == mine:
        return None
    return (f"the dispatch table keeps {config_text(now['config'])} (run {now['run_id'] or 'unknown'},"
            f" {now['time_ms']:.4g} ms), faster than this run's winner")
